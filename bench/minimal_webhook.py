"""The ceiling the webhook benchmark is compared with: the minimal handler perf-facts.md
measures (parse the review with orjson, build a 2-operation JSONPatch, base64, respond),
served by the same FastAPI/uvicorn/TLS stack as ``headroom-webhook``.

    python -m bench.minimal_webhook PORT CERT_DIR
"""

import asyncio
import base64
import sys
from pathlib import Path

import orjson
import uvicorn
import uvloop
from fastapi import FastAPI, Request, Response

app = FastAPI()


@app.post("/mutate/pods")
async def mutate(request: Request) -> Response:
    review = orjson.loads(await request.body())
    patch = [
        {"op": "add", "path": "/spec/containers/0/resources/limits/cpu", "value": "1"},
        {"op": "add", "path": "/spec/containers/1/resources/limits/cpu", "value": "200m"},
    ]
    response = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": review["request"]["uid"],
            "allowed": True,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(orjson.dumps(patch)).decode(),
        },
    }
    return Response(orjson.dumps(response), media_type="application/json")


def main() -> int:
    port, cert_dir = int(sys.argv[1]), Path(sys.argv[2])
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        http="httptools",
        lifespan="off",
        access_log=False,
        log_level="warning",
        ssl_certfile=str(cert_dir / "tls.crt"),
        ssl_keyfile=str(cert_dir / "tls.key"),
    )
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(uvicorn.Server(config).serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
