"""A stand-in browser for ``$BROWSER``: loads the URL and follows its redirects, as a person's
browser would after an instant approval. ``$BROWSER_LOG``, when set, gets each URL on a line."""

import os
import sys
import urllib.request

url = sys.argv[1]
if os.environ.get("BROWSER_LOG"):
    with open(os.environ["BROWSER_LOG"], "a", encoding="utf-8") as log:
        log.write(url + "\n")
with urllib.request.urlopen(url, timeout=20) as response:
    response.read()
