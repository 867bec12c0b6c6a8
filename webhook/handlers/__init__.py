"""One module per admission endpoint; each turns an AdmissionRequest into a Decision."""
