#!/usr/bin/env python3
"""A headless "browser" for `planmux login` against the conformance suite's authorization
server, which approves every request at once.

Usage (as $BROWSER; planmux appends the URL):
    headless_browser.py AUTHORIZATION_URL

Does what a browser does with a sign-in that needs no click: GETs the authorization URL
without following redirects, takes its `Location` (planmux's loopback callback, with the
code) and GETs that. Prints only the status codes and the callback page's title: never a
URL, a code or a token. Exits 0 when the callback page answered 200 (planmux signed in),
else 1.
"""

from __future__ import annotations

import re
import sys
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT = 20
"""Seconds for each request; the callback's answer waits for planmux's token exchange."""


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Hands the redirect back instead of following it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        return None


def say(line: str) -> None:
    print(f"headless_browser: {line}", file=sys.stderr)


def main(url: str) -> int:
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=TIMEOUT) as answer:
            status, location = answer.status, answer.headers.get("Location")
    except urllib.error.HTTPError as redirect:  # a 3xx not followed comes back as an error
        status, location = redirect.code, redirect.headers.get("Location")
    except urllib.error.URLError as failed:
        say(f"the authorization endpoint is unreachable ({failed.reason})")
        return 1
    say(f"authorization endpoint: HTTP {status}")
    if not location:
        say("no redirect to follow")
        return 1
    try:
        callback = urllib.parse.urljoin(url, location)
        with urllib.request.urlopen(callback, timeout=TIMEOUT) as page:
            status, body = page.status, page.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as failed:
        status, body = failed.code, failed.read().decode("utf-8", "replace")
    except urllib.error.URLError as failed:
        say(f"the redirect went nowhere ({failed.reason})")
        return 1
    title = re.search(r"<h1>(.*?)</h1>", body)
    say(f"callback: HTTP {status} ({title.group(1) if title else 'no title'})")
    return 0 if status == 200 else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[-1]))
