"""`python -m ggrad.rpc_server`: serve this machine's devices to ggrad clients over GGML's RPC protocol.

    python -m ggrad.rpc_server --host 127.0.0.1 --port 50052 [--device CPU] [--max-buffer-bytes N]
                               [--idle-timeout S] [--threads N] [--max-clients N]

Every request is checked before GGML sees it (see ggrad.ggml.rpc.server): a client that sends anything
invalid is disconnected and the server serves on. The protocol has no authentication: bind 127.0.0.1
(the default) or a network you trust.
"""

import argparse
import logging
import os

from .ggml import backend


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ggrad.rpc_server", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=50052)
    parser.add_argument("--device", action="append", default=None,
                        help="a device to serve (cpu, cuda:0, ...); repeat for several (default: cpu)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads per client")
    parser.add_argument("--max-clients", type=int, default=4, help="clients served at once (default 4)")
    parser.add_argument("--max-buffer-bytes", type=int, default=None,
                        help="device memory all clients may hold together (default: the free memory)")
    parser.add_argument("--idle-timeout", type=float, default=600.0,
                        help="seconds a client may stay silent before it is disconnected (default 600)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    backend.rpc_start_server(f"{args.host}:{args.port}", args.device or ["cpu"], n_threads=args.threads,
                             max_clients=args.max_clients, max_buffer_bytes=args.max_buffer_bytes,
                             idle_timeout=args.idle_timeout)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
