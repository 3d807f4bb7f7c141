"""GGML's RPC protocol, made safe on both ends.

Server side (`server`, `proxy`, `guard`, `worker`): `python -m ggrad.rpc_server` puts a checking proxy in
front of GGML's server, which trusts its clients. Client side (`client`, `relay`): GGML's client aborts its
process when a server dies, so it talks to a relay process that answers for a dead or bogus server.
`protocol` holds the message layouts of GGML 0.20.2 (protocol v5.0.0).
"""
