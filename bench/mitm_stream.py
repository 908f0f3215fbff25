"""mitmdump addon for the benchmarks: stream response bodies through instead of buffering them.

Used as `mitmdump --mode reverse:http://127.0.0.1:UP -s bench/mitm_stream.py`; without it mitmproxy
holds an SSE response until it ends, which no MCP client would accept.
"""


def responseheaders(flow):
    flow.response.stream = True
