import threading

from kag.core.agent.bridge import BridgeReply, EvalBridge, request


def test_requests_reach_the_handler_and_replies_come_back(tmp_path):
    seen = []

    def handler(action, args):
        seen.append((action, args))
        return BridgeReply(f"{action} ok", 0 if action == "verify" else 3)

    with EvalBridge(handler, tmp_path / "b") as bridge:
        assert request(str(bridge.socket_path), "verify", ["--quick"]) == BridgeReply("verify ok", 0)
        assert request(str(bridge.socket_path), "profile").returncode == 3
        bad = request(str(bridge.socket_path), "rm -rf /")
        assert bad.returncode == 2 and "unknown action" in bad.output
    assert seen == [("verify", ["--quick"]), ("profile", [])]
    assert not (tmp_path / "b" / "eval.sock").exists()


def test_a_failing_handler_is_an_error_reply_and_the_bridge_keeps_serving(tmp_path):
    calls = []

    def handler(action, args):
        calls.append(action)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return BridgeReply("fine")

    with EvalBridge(handler, tmp_path) as bridge:
        first = request(str(bridge.socket_path), "compile")
        assert first.returncode == 1 and "RuntimeError: boom" in first.output
        assert request(str(bridge.socket_path), "compile").output == "fine"


def test_evaluations_of_one_episode_run_one_at_a_time(tmp_path):
    active, peak = [0], [0]
    lock = threading.Lock()

    def handler(action, args):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        threading.Event().wait(0.05)
        with lock:
            active[0] -= 1
        return BridgeReply("ok")

    with EvalBridge(handler, tmp_path) as bridge:
        threads = [threading.Thread(target=request, args=(str(bridge.socket_path), "verify")) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert peak[0] == 1


def test_a_malformed_request_gets_a_reply_the_skill_scripts_can_read(tmp_path):
    import json
    import socket

    with EvalBridge(lambda action, args: BridgeReply("unused"), tmp_path) as bridge:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(bridge.socket_path))
            sock.sendall(b"not json\n")
            reply = json.loads(sock.makefile().readline())
        assert reply["returncode"] == 1 and reply["output"].startswith("kag evaluator error: JSONDecodeError")
        assert request(str(bridge.socket_path), "verify").output == "unused"


def test_the_handler_can_come_after_the_bridge(tmp_path):
    """An episode starts its sandbox on the bridge's folder before its evaluator exists."""
    with EvalBridge(directory=tmp_path) as bridge:
        early = request(str(bridge.socket_path), "verify")
        assert early.returncode == 1 and "no evaluator is answering yet" in early.output
        bridge.set_handler(lambda action, args: BridgeReply(f"{action} answered"))
        assert request(str(bridge.socket_path), "verify") == BridgeReply("verify answered", 0)
