"""A CPU stand-in for `trtllm-serve disaggregated`: the front end that sends each request to a context server, then to
a generation server, as TensorRT-LLM's disaggregated server does. Standard library only (it runs where the stand-in
trtllm-serve runs: `trtllm-serve disaggregated ...` dispatches here).

Built from TensorRT-LLM's source, not from what repro expects:
- the config (TRT @ 0228a712 `tensorrt_llm/llmapi/disagg_utils.py`): hostname, port, context_servers and
  generation_servers with num_instances and urls host:port (their count must match), a router per role (round_robin
  is the default); other keys pass to the servers;
- `trtllm-serve disaggregated -c FILE -t SERVER_START_TIMEOUT -r REQUEST_TIMEOUT` (TRT @ 00209af1
  `tensorrt_llm/commands/serve.py`; NVIDIA's scale-out scripts pass --server_start_timeout/--request_timeout 7200):
  before serving, every worker's GET /health must answer 200, polled every 3 s up to the start timeout, else it exits;
- each request (TRT @ 01edceae `tensorrt_llm/serve/openai_disagg_server.py`, openai_disagg_service.py): to a
  context server first as a non-streamed request with `disaggregated_params.request_type = "context_only"`, then,
  with the context's answer, to a generation server (`generation_only`), whose answer (streamed or not) is the
  client's; a worker that fails or answers an error fails the request (5xx), and a front end whose worker died keeps
  accepting connections.
Here the generation server's stand-in generates the whole answer itself (there is no KV cache to hand over): the
front end costs what the real one costs in hops, not in work.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import socket
import sys
import time
import urllib.error
import urllib.request

HEALTH_POLL_S = 3.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="trtllm-serve disaggregated")
    p.add_argument("-c", "--config_file", required=True)
    p.add_argument("-t", "--server_start_timeout", type=int, default=180)
    p.add_argument("-r", "--request_timeout", type=int, default=180)
    return p.parse_args(argv)


def load_config(path: str) -> dict:
    """The config as repro writes it: JSON, which is YAML too (the real server reads it with yaml.safe_load)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    for role in ("context_servers", "generation_servers"):
        servers = doc.get(role) or {}
        urls = servers.get("urls") or []
        if len(urls) != int(servers.get("num_instances", 1)):
            raise ValueError(
                f"Number of hostnames ({len(urls)}) should be equal to the number of instances "
                f"({servers.get('num_instances', 1)})"
            )
    return doc


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{url}/health", timeout=5) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


def wait_for_workers(urls: list[str], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [u for u in urls if not healthy(u)]
        if not missing:
            return True
        if time.monotonic() > deadline:
            print(f"[stand-in disagg] servers not ready within {timeout_s:g} s: {', '.join(missing)}", flush=True)
            return False
        time.sleep(HEALTH_POLL_S)


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, dict[str, str]] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    return lines[0], headers


class Front:
    def __init__(self, config: dict, request_timeout: float) -> None:
        self.ctx = itertools.cycle(config["context_servers"]["urls"])
        self.gen = itertools.cycle(config["generation_servers"]["urls"])
        self.timeout = request_timeout

    async def upstream(self, url: str, path: str, body: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, _, port = url.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), self.timeout)
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {url}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        return reader, writer

    async def context(self, path: str, request: dict) -> dict:
        """The context phase: a non-streamed, one-token request marked context_only; its answer is handed on."""
        body = dict(request, stream=False, max_tokens=1, disaggregated_params={"request_type": "context_only"})
        body.pop("stream_options", None)
        reader, writer = await self.upstream(next(self.ctx), path, json.dumps(body).encode())
        try:
            head = await asyncio.wait_for(_read_head(reader), self.timeout)
            if head is None or " 200 " not in head[0] + " ":
                raise ConnectionError(f"context server answered {head[0] if head else 'nothing'}")
            data = await asyncio.wait_for(reader.read(), self.timeout)
        finally:
            writer.close()
        return json.loads(data or b"{}")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await _read_head(reader)
            if head is None:
                return
            method, path = head[0].split(" ")[:2]
            if method == "GET" and path == "/health":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            body = await reader.readexactly(int(head[1].get("content-length", "0")))
            request = json.loads(body)
            try:
                ctx = await self.context(path, request)
                params = ((ctx.get("choices") or [{}])[0] or {}).get("disaggregated_params") or {}
                gen_body = dict(request, disaggregated_params={**params, "request_type": "generation_only"})
                up_r, up_w = await self.upstream(next(self.gen), path, json.dumps(gen_body).encode())
            except (OSError, ConnectionError, ValueError, asyncio.TimeoutError) as exc:
                msg = json.dumps({"error": f"disaggregated request failed: {exc}"}).encode()
                writer.write(
                    f"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: "
                    f"{len(msg)}\r\nConnection: close\r\n\r\n".encode()
                    + msg
                )
                return
            try:
                while chunk := await up_r.read(65536):
                    writer.write(chunk)
                    await writer.drain()
            finally:
                up_w.close()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            try:
                await writer.drain()
                writer.close()
            except ConnectionError:
                pass


async def serve(sock: socket.socket, front: Front) -> None:
    sock.listen(1024)
    sock.setblocking(False)
    server = await asyncio.start_server(front.handle, sock=sock)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    config = load_config(args.config_file)
    port = int(config.get("port", 8000))
    host = str(config.get("hostname", "localhost"))
    print(f"[stand-in] trtllm-serve disaggregated on {host}:{port}", flush=True)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host if host != "localhost" else "127.0.0.1", port))
    except OSError as e:
        print(f"RuntimeError: Failed to bind socket to {host}:{port}: {e}", flush=True)
        return 1
    workers = [*config["context_servers"]["urls"], *config["generation_servers"]["urls"]]
    if not wait_for_workers(workers, args.server_start_timeout):
        return 1
    print(f"[stand-in disagg] {len(workers)} servers ready; serving", flush=True)
    asyncio.run(serve(sock, Front(config, args.request_timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
