"""OAuth-protected MCP server (FastMCP, Streamable HTTP) for planmux's OAuth end-to-end
test (tests/it/interop/oauth.rs). It runs in tests/interop/.venv-peers (fastmcp and mcp as
tests/interop/requirements-peers.txt pins them; scripts/install-interop makes it).

Verifies RS256 JWT access tokens from the AS via its JWKS (iss, aud, exp, scope),
publishes RFC 9728 protected-resource metadata and answers 401 with
`WWW-Authenticate: Bearer ... resource_metadata="..."`.

    python mcp_server.py --port 8765 --as-url http://127.0.0.1:9400
"""

import argparse

from fastmcp import FastMCP
from fastmcp.server.auth import RemoteAuthProvider
from fastmcp.server.auth.providers.jwt import JWTVerifier
from fastmcp.server.dependencies import get_access_token
from pydantic import AnyHttpUrl

p = argparse.ArgumentParser()
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, default=8765)
p.add_argument("--path", default="/mcp")
p.add_argument("--as-url", default="http://127.0.0.1:9400", help="AS issuer URL")
p.add_argument("--jwks-uri", default=None, help="default: <as-url>/jwks")
p.add_argument("--scope", default="mcp:tools")
args = p.parse_args()

base_url = f"http://{args.host}:{args.port}"
resource = base_url + args.path  # what PRM advertises as `resource`; must equal the JWT aud

verifier = JWTVerifier(
    jwks_uri=args.jwks_uri or f"{args.as_url}/jwks",
    issuer=args.as_url,
    audience=resource,
    algorithm="RS256",
    required_scopes=[args.scope],
    jwks_refresh_interval=0,  # unknown kid (restarted AS, new key) -> refetch at once
)
auth = RemoteAuthProvider(
    token_verifier=verifier,
    authorization_servers=[AnyHttpUrl(args.as_url)],
    base_url=base_url,
    scopes_supported=[args.scope],
    resource_name="planmux-oauth-test",
)

mcp = FastMCP("oauth-test", auth=auth)


@mcp.tool
def whoami() -> dict:
    """Return the subject, client, scopes, audience and expiry of the caller's token."""
    tok = get_access_token()
    claims = tok.claims if tok else {}
    return {
        "sub": claims.get("sub"),
        "client_id": tok.client_id if tok else None,
        "scopes": tok.scopes if tok else [],
        "aud": claims.get("aud"),
        "exp": claims.get("exp"),
    }


@mcp.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    mcp.run(transport="http", host=args.host, port=args.port, path=args.path, show_banner=False)
