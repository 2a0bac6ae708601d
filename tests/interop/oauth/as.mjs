// Authorization server for planmux's OAuth end-to-end test (tests/it/interop/oauth.rs),
// run on the Node 22 of tests/interop (oidc-provider 9 wants 22): panva's oidc-provider
// (certified OpenID provider) with open DCR, PKCE S256, refresh tokens, RFC 8707
// resource indicators -> RS256 JWT access tokens (aud = MCP resource), RFC 7009
// revocation, RFC 9207 iss, and the built-in devInteractions login/consent forms.
//
//   AS_PORT=9400 MCP_RESOURCE=http://127.0.0.1:8765/mcp AT_TTL=5 node as.mjs
//
// Test-only extras:
// - POST /admin/revoke?sub=alice (and/or &client_id=...) drops every grant, refresh
//   token, access-token record, code and session of that user/client, so the next
//   refresh gets invalid_grant (already issued JWTs stay valid until exp).
// - GET /admin/seen: how many token requests of each grant type succeeded (`grants`) and
//   failed (`refused`, by `grant_type:error`), and every authorization code, access
//   token and refresh token issued, for a test that looks for them where they must not be.
// - POST /admin/hang-token?on=1 (on=0 to stop): token requests from then on get no
//   answer, as from an authorization server that hangs.
// - POST /admin/token-delay?ms=500 (ms=0 to stop): token requests are answered that much
//   later, so that two clients' refreshes overlap.
// - CC_CLIENTS="alice:secret:platform+ops,bob:secret:dev" registers client-credentials
//   clients, each token's `sub` its id and its `groups` claim the listed groups (the
//   users of planmux's resource-server test, tests/it/interop/front_auth.rs).
import crypto from 'node:crypto';
import Provider, { errors } from 'oidc-provider';

const PORT = Number(process.env.AS_PORT ?? 9400);
const ISSUER = process.env.AS_ISSUER ?? `http://127.0.0.1:${PORT}`;
const RESOURCES = (process.env.MCP_RESOURCE ?? 'http://127.0.0.1:8765/mcp').split(',');
const AT_TTL = Number(process.env.AT_TTL ?? 5);          // access token lifetime (s)
const RT_TTL = Number(process.env.RT_TTL ?? 86400);      // refresh token lifetime (s)
const SCOPE = process.env.MCP_SCOPE ?? 'mcp:tools';
const CC_CLIENTS = (process.env.CC_CLIENTS ?? '').split(',').filter(Boolean).map((entry) => {
  const [id, secret, groups] = entry.split(':');
  return { id, secret, groups: (groups ?? '').split('+').filter(Boolean) };
});

// In-memory adapter we can enumerate (the built-in one is not exported).
const store = new Map(); // `${model}:${id}` -> { payload, exp }
class Adapter {
  constructor(model) { this.model = model; }
  k(id) { return `${this.model}:${id}`; }
  async upsert(id, payload, expiresIn) {
    store.set(this.k(id), { payload, exp: expiresIn ? Date.now() + expiresIn * 1000 : Infinity });
  }
  async find(id) {
    const e = store.get(this.k(id));
    if (!e || e.exp < Date.now()) return undefined;
    return e.payload;
  }
  async findBy(field, v) {
    for (const [key, e] of store) {
      if (key.startsWith(`${this.model}:`) && e.payload[field] === v && e.exp >= Date.now()) return e.payload;
    }
    return undefined;
  }
  findByUid(uid) { return this.findBy('uid', uid); }
  findByUserCode(c) { return this.findBy('userCode', c); }
  async consume(id) { const e = store.get(this.k(id)); if (e) e.payload.consumed = Math.floor(Date.now() / 1000); }
  async destroy(id) { store.delete(this.k(id)); }
  async revokeByGrantId(grantId) {
    for (const [key, e] of store) if (e.payload.grantId === grantId) store.delete(key);
  }
}

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: crypto.randomUUID(), alg: 'RS256', use: 'sig' };

const provider = new Provider(ISSUER, {
  adapter: Adapter,
  clients: CC_CLIENTS.map((c) => ({
    client_id: c.id, client_secret: c.secret, grant_types: ['client_credentials'],
    redirect_uris: [], response_types: [], scope: SCOPE,
  })),
  extraTokenClaims: async (ctx, token) => {
    const client = CC_CLIENTS.find((c) => c.id === token.clientId);
    return client ? { groups: client.groups } : undefined;
  },
  jwks: { keys: [jwk] },
  // The resource scope must be listed too: rmcp puts its scopes in the DCR `scope`
  // member and oidc-provider rejects client metadata naming scopes it doesn't know.
  scopes: ['openid', 'offline_access', SCOPE],
  claims: { openid: ['sub'] },
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  features: {
    devInteractions: { enabled: true },   // login form (any login/password) + consent form
    clientCredentials: { enabled: true }, // the CC_CLIENTS
    registration: { enabled: true },      // RFC 7591, open (no initial access token)
    revocation: { enabled: true },        // RFC 7009
    introspection: { enabled: true },     // RFC 7662 (handy for debugging)
    resourceIndicators: {                 // RFC 8707
      enabled: true,
      defaultResource: () => RESOURCES[0],
      useGrantedResource: () => true,     // refresh without `resource` still yields a JWT
      getResourceServerInfo: (ctx, indicator) => {
        if (!RESOURCES.includes(indicator)) throw new errors.InvalidTarget();
        return {
          scope: SCOPE, audience: indicator, accessTokenTTL: AT_TTL,
          accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  // Default only issues refresh tokens when offline_access was granted; always issue.
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: { RefreshToken: RT_TTL, Grant: RT_TTL, Session: RT_TTL },
  clientBasedCORS: () => true,
});

const seen = { grants: {}, refused: {}, codes: [], access_tokens: [], refresh_tokens: [] };
provider.on('authorization.success', (ctx, out) => { if (out.code) seen.codes.push(out.code); });
provider.on('grant.success', (ctx) => {
  const grant = ctx.oidc.params.grant_type;
  seen.grants[grant] = (seen.grants[grant] ?? 0) + 1;
  if (ctx.body?.access_token) seen.access_tokens.push(ctx.body.access_token);
  if (ctx.body?.refresh_token) seen.refresh_tokens.push(ctx.body.refresh_token);
});
provider.on('grant.error', (ctx, err) => {
  const key = `${ctx.oidc?.params?.grant_type ?? '?'}:${err.error ?? err.message}`;
  seen.refused[key] = (seen.refused[key] ?? 0) + 1;
  console.log(`token request refused: ${key}`);
});
let hangToken = false;
let tokenDelay = 0;

provider.use(async (ctx, next) => {
  if (ctx.method === 'GET' && ctx.path === '/admin/seen') { ctx.body = seen; return; }
  if (ctx.method === 'POST' && ctx.path === '/admin/hang-token') {
    hangToken = ctx.query.on !== '0';
    ctx.body = { hang: hangToken };
    return;
  }
  if (ctx.method === 'POST' && ctx.path === '/admin/token-delay') {
    tokenDelay = Number(ctx.query.ms ?? 0);
    ctx.body = { delay_ms: tokenDelay };
    return;
  }
  if (hangToken && ctx.method === 'POST' && ctx.path === '/token') {
    await new Promise(() => {}); // never answers; the client's own bound ends it
  }
  if (tokenDelay > 0 && ctx.method === 'POST' && ctx.path === '/token') {
    await new Promise((resolve) => setTimeout(resolve, tokenDelay));
  }
  if (ctx.method === 'POST' && ctx.path === '/admin/revoke') {
    const sub = ctx.query.sub; const clientId = ctx.query.client_id;
    let n = 0;
    for (const [key, e] of store) {
      const p = e.payload;
      if ((sub && p.accountId === sub) || (clientId && p.clientId === clientId)) { store.delete(key); n += 1; }
    }
    ctx.body = { revoked: n };
    return;
  }
  await next();
});

provider.listen(PORT, '127.0.0.1', () => console.log(`AS listening, issuer ${ISSUER}, resources ${RESOURCES}, AT_TTL=${AT_TTL}s`));
