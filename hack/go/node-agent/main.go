// Command node-agent runs in a real-node guest and answers the harness's reads of the
// guest's own files (cgroupfs, logs) over a virtio-serial port, so the harness sees the
// cgroups the kubelet writes without going through the kubelet, a container or the
// network.
//
// Protocol: one JSON object per line each way. A request
//
//	{"id": 7, "read": ["/sys/fs/cgroup/kubepods/*/pod<uid>/cpu.max"], "tail": 65536}
//
// is answered with
//
//	{"id": 7, "files": {"/sys/fs/cgroup/kubepods/burstable/pod<uid>/cpu.max": "max 100000\n"}}
//
// Each entry of "read" is a glob; every file it matches is read (its last "tail" bytes
// when "tail" is set). A file that cannot be read is answered with its error in
// "errors". The agent serves one request at a time, in order.
//
// One request writes instead: {"id": 8, "shiftClockMillis": 3000000} moves the guest's
// wall clock by that much (a negative amount moves it back) and is answered with the new
// time in "clock", or its error in "errors". It is a fault only a clock can produce: what
// a kubelet does once a time has come (a token's refresh), without waiting for it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const portName = "headroom.agent"

type request struct {
	ID               int64    `json:"id"`
	Read             []string `json:"read"`
	Tail             int64    `json:"tail"`
	ShiftClockMillis int64    `json:"shiftClockMillis"`
}

type response struct {
	ID     int64             `json:"id"`
	Files  map[string]string `json:"files"`
	Errors map[string]string `json:"errors,omitempty"`
	Clock  string            `json:"clock,omitempty"`
}

// findPort returns the device of the virtio-serial port named portName; the guest has
// no udev to make the /dev/virtio-ports symlink.
func findPort() (string, error) {
	names, err := filepath.Glob("/sys/class/virtio-ports/*/name")
	if err != nil {
		return "", err
	}
	for _, path := range names {
		name, err := os.ReadFile(path)
		if err == nil && strings.TrimSpace(string(name)) == portName {
			return "/dev/" + filepath.Base(filepath.Dir(path)), nil
		}
	}
	return "", fmt.Errorf("no virtio-serial port named %s", portName)
}

func readFile(path string, tail int64) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	if tail > 0 {
		if info, err := file.Stat(); err == nil && info.Size() > tail {
			if _, err := file.Seek(-tail, io.SeekEnd); err != nil {
				return "", err
			}
		}
	}
	// cgroupfs files report a size of 0 (or 4096): read to EOF, at most 4 MiB.
	data, err := io.ReadAll(io.LimitReader(file, 4<<20))
	return string(data), err
}

func shiftClock(millis int64) (string, error) {
	target := time.Now().Add(time.Duration(millis) * time.Millisecond)
	tv := syscall.NsecToTimeval(target.UnixNano())
	if err := syscall.Settimeofday(&tv); err != nil {
		return "", err
	}
	return time.Now().UTC().Format(time.RFC3339Nano), nil
}

func answer(req request) response {
	resp := response{ID: req.ID, Files: map[string]string{}}
	if req.ShiftClockMillis != 0 {
		clock, err := shiftClock(req.ShiftClockMillis)
		if err != nil {
			resp.Errors = map[string]string{"clock": err.Error()}
		}
		resp.Clock = clock
	}
	for _, pattern := range req.Read {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			resp.Errors = map[string]string{pattern: err.Error()}
			continue
		}
		for _, path := range paths {
			content, err := readFile(path, req.Tail)
			if err != nil {
				if resp.Errors == nil {
					resp.Errors = map[string]string{}
				}
				resp.Errors[path] = err.Error()
				continue
			}
			resp.Files[path] = content
		}
	}
	return resp
}

func serve(device string) error {
	port, err := os.OpenFile(device, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer port.Close()
	scanner := bufio.NewScanner(port)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	encoder := json.NewEncoder(port)
	for scanner.Scan() {
		var req request
		if err := json.Unmarshal(scanner.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "node-agent: bad request: %v\n", err)
			continue
		}
		if err := encoder.Encode(answer(req)); err != nil {
			return err
		}
	}
	return scanner.Err()
}

func main() {
	for {
		device, err := findPort()
		if err == nil {
			err = serve(device)
		}
		// The port reads EOF while the host end is not connected: wait and reopen.
		if err != nil {
			fmt.Fprintf(os.Stderr, "node-agent: %v\n", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
