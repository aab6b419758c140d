"""One tuning of a key per store: claims, so that processes sharing a store never measure one key twice.

Before a key is tuned into a store that other processes may write (a database file or server),
it is claimed there (``ResultsStore.claim``); the owner renews the claim while it tunes and ends
it with the outcome. A process that reaches a key another one is tuning waits for that tuning's
winner and launches it, so every process launches the winner the store holds. A claim whose owner
died is not renewed, expires and is taken over. ``tunekit tune`` (``tunekit.ahead``) and a miss at
run time (``tunekit.autotuner``) both go through here.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from .store import Claim, KernelIdentity, ResultsStore

logger = logging.getLogger(__name__)

#: Seconds a run-time claim lasts unless renewed: how long the keys of a process that died wait.
LEASE_SECONDS = 30.0
#: Seconds between looks at the store while another process tunes the key (doubling up to the last).
POLL_SECONDS = (0.05, 1.0)

Result = TypeVar("Result")


def owner_name(where: str = "") -> str:
    """Who claims: host, process and thread (and ``where``: a device)."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}" + (f":{where}" if where else "")


class ClaimRenewal:
    """Renews a claim every third of its lease while a key is tuned, in a daemon thread; ``stop``
    ends it."""

    def __init__(self, store: ResultsStore, identity: KernelIdentity, space_hash: str, key: str, owner: str,
                 lease: float) -> None:
        self._stop = threading.Event()

        def renew() -> None:
            while not self._stop.wait(lease / 3):
                try:
                    if not store.renew_claim(identity, space_hash, key, owner=owner, lease=lease):
                        if not self._stop.is_set():
                            logger.warning("%s %s: %s lost its claim (not renewed in time); another owner may "
                                           "tune it too", identity.name, key, owner)
                        return
                except Exception as error:  # a store that is briefly unreachable: try again next time
                    logger.warning("%s %s: renewing the claim failed: %s", identity.name, key, error)

        self._thread = threading.Thread(target=renew, name="tunekit-claim-renewal", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class KeyClaim:
    """This process's claim on one key of one store: ``take`` it (once), ``release`` it with the
    outcome. While held, a thread renews it."""

    def __init__(self, store: ResultsStore, identity: KernelIdentity, space_hash: str, key: str) -> None:
        self.store, self.identity, self.space_hash, self.key = store, identity, space_hash, key
        self.owner = owner_name()
        self.holder = ""  # who holds it when another process does
        self._renewal: ClaimRenewal | None = None
        self._held = False

    def take(self, renewed_by_calls: bool = False) -> bool:
        """Claim the key; False while another process holds it (``holder``) or it is done (a claim
        of a process of this host that died is taken at once: ``ResultsStore.claim``). A thread
        renews it while held, unless ``renewed_by_calls`` (a tuning spread over calls): then each
        ``renew`` does, and a tuning whose calls stop lets it expire for another process."""
        store, identity = self.store, self.identity
        state = store.claim(identity, self.space_hash, self.key, owner=self.owner, lease=LEASE_SECONDS,
                            retry_failed_before=math.inf)
        if state is not Claim.CLAIMED:
            self.holder = store.claims(identity, self.space_hash).get(self.key, {}).get("owner") or ""
            return False
        self._held = True
        if not renewed_by_calls:
            self._renewal = ClaimRenewal(store, identity, self.space_hash, self.key, self.owner, LEASE_SECONDS)
        return True

    def renew(self) -> None:
        """Extend a claim held by this process by its lease from now."""
        if self._held:
            self.store.renew_claim(self.identity, self.space_hash, self.key, owner=self.owner, lease=LEASE_SECONDS)

    def release(self, won: bool) -> None:
        """End the claim: finished with a winner, or given back for a later process to tune."""
        if not self._held:
            return
        self._held = False
        if self._renewal is not None:
            self._renewal.stop()
            self._renewal = None
        try:
            self.store.release_claim(self.identity, self.space_hash, self.key, owner=self.owner,
                                     outcome="winner" if won else None)
        except Exception as error:  # the claim expires by itself
            logger.warning("%s %s: the claim could not be released (%s); it expires in %.0f s", self.identity.name,
                           self.key, error, LEASE_SECONDS)


def tune_once(store: ResultsStore, identity: KernelIdentity, space_hash: str, key: str,
              tune: Callable[[], Result], stored: Callable[[], Result | None],
              wait_seconds: float | None = None) -> Result:
    """What ``tune()`` gives for ``key``, or, when another process tunes it into ``store`` now, the
    winner it stores there (``stored()``, None while there is none). A wait longer than
    ``wait_seconds`` (a seconds budget) ends in a tuning of this process's own, with a warning.
    A store no other process writes (in memory, read only) needs no claim."""
    if not store.shared:
        return tune()
    claim = KeyClaim(store, identity, space_hash, key)
    started = time.monotonic()
    poll = POLL_SECONDS[0]
    while not claim.take():
        found = stored()
        if found is not None:
            return found
        if wait_seconds is not None and time.monotonic() - started > wait_seconds:
            logger.warning("%s %s: another process has tuned this key for longer than the budget's %.1f s; tuning "
                           "it here too", identity.name, key, wait_seconds)
            return tune()
        if poll == POLL_SECONDS[0]:
            logger.info("%s %s: %s is tuning this key into the store; waiting for its winner", identity.name, key,
                        claim.holder or "another process")
        time.sleep(poll)
        poll = min(POLL_SECONDS[1], 2 * poll)
    won = False
    try:
        result = tune()
        won = stored() is not None
        return result
    finally:
        claim.release(won)


