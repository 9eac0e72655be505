"""Starts a thread when imported: the zygote must refuse to preload it (a fork copies no thread, and any lock the
thread held stays held in every rank)."""

import threading

threading.Thread(target=threading.Event().wait, daemon=True).start()
