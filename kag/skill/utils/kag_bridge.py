"""Fixed file (read-only). Inside a sandbox the skill scripts reach kag's trusted evaluator, which
runs outside, through the socket in $KAG_BRIDGE (kag.core.agent.bridge). Standard library only."""

import json
import os
import socket


def via_bridge(action: str, args: list) -> int:
    """Inside a sandbox: ask the trusted evaluator outside through $KAG_BRIDGE (kag.core.agent.bridge)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(os.environ["KAG_BRIDGE"])
        sock.sendall((json.dumps({"action": action, "args": args}) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data.decode())
    print(reply["output"], end="" if reply["output"].endswith("\n") else "\n")
    return int(reply["returncode"])
