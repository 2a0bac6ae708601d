#!/usr/bin/env python3
"""Headless "browser" for oidc-provider's devInteractions: given an authorization URL,
log in and consent like a user would, then deliver the final redirect (the
`redirect_uri?code=...&state=...&iss=...` URL) to the client's loopback listener.

    python browser.py 'http://127.0.0.1:9400/auth?...'            # login as "alice"
    BROWSER_LOGIN=bob python browser.py URL                        # another user
    python browser.py --deny URL                                   # press "Cancel"
    python browser.py --no-deliver URL                             # only print redirect

Usable as planmux's BROWSER command (the URL is the last argument), as
tests/it/interop/oauth.rs uses it. Exit status 0 when a redirect back to a non-AS
origin was reached (printed on stdout). Standard library only.
"""

import http.cookiejar
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None  # we follow redirects by hand so we can stop at the client's redirect_uri


def main() -> int:
    argv = sys.argv[1:]
    deny = "--deny" in argv
    deliver = "--no-deliver" not in argv
    url = [a for a in argv if not a.startswith("--")][-1]
    login = os.environ.get("BROWSER_LOGIN", "alice")
    as_origin = urllib.parse.urlsplit(url)[:2]
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect)

    method, data = "GET", None
    for _ in range(20):
        if urllib.parse.urlsplit(url)[:2] != as_origin:  # left the AS: the redirect_uri
            print(url)
            if deliver:
                try:
                    with opener.open(url, timeout=10) as r:
                        r.read()
                except urllib.error.HTTPError:
                    pass  # the client answered; status is its business
                except OSError as e:
                    print(f"browser: nothing took the redirect at {url}: {e}", file=sys.stderr)
                    return 1
            return 0
        req = urllib.request.Request(url, data=data, method=method)
        try:
            with opener.open(req, timeout=10) as r:
                status, headers, body = r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:  # 3xx (not followed) and 4xx/5xx land here
            status, headers, body = e.code, e.headers, e.read().decode()
        if status in (301, 302, 303, 307, 308):
            url = urllib.parse.urljoin(url, headers["Location"])
            method, data = "GET", None
            continue
        if status != 200:
            print(f"browser: HTTP {status} at {url}\n{body[:2000]}", file=sys.stderr)
            return 1
        # devInteractions pages: one <form method="post"> with a hidden `prompt` input.
        m = re.search(r'<form[^>]*action="([^"]+)"[^>]*method="post"', body)
        prompt = re.search(r'name="prompt" value="(\w+)"', body)
        if not m or not prompt:
            print(f"browser: no login/consent form at {url}\n{body[:2000]}", file=sys.stderr)
            return 1
        action = urllib.parse.urljoin(url, m.group(1).replace("&amp;", "&"))
        if deny:  # the "[ Cancel ]" link: GET /interaction/<uid>/abort
            url, method, data = action + "/abort", "GET", None
            continue
        fields = {"prompt": prompt.group(1)}
        if prompt.group(1) == "login":
            fields.update(login=login, password="any")
        url, method = action, "POST"
        data = urllib.parse.urlencode(fields).encode()
    print("browser: too many steps", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
