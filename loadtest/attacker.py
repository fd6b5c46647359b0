"""The attacker tab of ``make loadtest`` (``--attacker``): one more browser session that repeats
the hostile visits of issue #26 while the normal sessions work, so their latencies can be
compared with and without it.

Each round: upload a gzipped FASTA bomb (270 MB of two-letter lines in ~260 kB), paste a 999 kB
run of digits as a mutation list, upload a gzipped multi-model structure of 1.35 M atoms (when
../shared/structures is there), upload a DMS table whose mutated_sequence derives a
100,000-residue wild type, and open five tabs of one link that asks for a whole-sequence masked
map. Each must end in the page's refusal (or, for the tabs, the scan's estimate and Start
button, the scan running, or the busy warning): counted as expected; anything else counts as unexpected.
"""

from __future__ import annotations

import asyncio
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import hostile_files  # noqa: E402  (tests/: the attack files the hosted-attack tests upload)

STRUCTURE = ROOT.parent / "shared" / "structures" / "2BEG.pdb"
# One generator for the whole sequence (a new Random(26) per letter made a run of one letter).
_RNG = random.Random(26)
SEQUENCE = "".join(_RNG.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(300))


def attack_files(folder: Path) -> list[tuple[str, str, Path, str]]:
    """(name, URL tail, file, the page's answer) of each upload attack, written into ``folder``
    by the same functions that write the hosted-attack tests' files (``tests/hostile_files.py``)."""
    attacks = [
        ("gzipped FASTA bomb", "", hostile_files.fasta_bomb(folder), "decompresses to more than"),
        ("mutation list of digits", f"?page=variants&seq={SEQUENCE[:40]}", hostile_files.digits(folder),
         "None of the 1 entries"),
        ("DMS wild type of 100,000 residues", "?page=variants&vinput=dms", hostile_files.long_wild_type_dms(folder),
         "has 100,000 residues"),
    ]
    if STRUCTURE.exists():
        attacks.append(("multi-model structure bomb", f"?page=structure&seq={SEQUENCE[:42]}",
                        hostile_files.structure_bomb(folder, STRUCTURE), "decompresses to more than"))
    return attacks


class Attacker:
    """The hostile visitor; ``stats`` is the load test's ``Stats`` (outcomes under ``attacker``)."""

    def __init__(self, browser, base: str, stats, timeout: float, folder: Path):
        self.browser, self.base, self.stats, self.timeout = browser, base, stats, timeout
        self.attacks = attack_files(folder)

    async def upload(self, name: str, tail: str, file: Path, answer: str) -> None:
        context = await self.browser.new_context(viewport={"width": 1400, "height": 1600})
        try:
            page = await context.new_page()
            page.set_default_timeout(self.timeout * 1000)
            await page.goto(f"{self.base}/{tail}")
            uploader = page.locator('[data-testid="stFileUploader"] input[type="file"]').first
            await uploader.wait_for(state="attached")
            started = time.monotonic()
            await uploader.set_input_files(str(file))
            await page.get_by_text(answer).first.wait_for()
            self.stats.latencies[f"attacker: {name} (refused)"].append(time.monotonic() - started)
            self.stats.expected[f"attack refused: {name}"] += 1
        except Exception as err:  # no refusal in time, or the page broke
            self.stats.fail(-2, f"attack {name}", f"{type(err).__name__}: {err}")
        finally:
            await context.close()

    async def five_tabs(self) -> None:
        """Five tabs of a link asking for the masked map of a 300-residue sequence: none may start
        the scan without the page's Start button (and the queue holds at most 2 of the visitor's)."""
        context = await self.browser.new_context(viewport={"width": 1400, "height": 1600})
        try:
            wild = SEQUENCE[5]
            link = f"{self.base}/?page=variants&vmap=masked&muts={wild}6{'W' if wild != 'W' else 'A'}&seq={SEQUENCE}"
            pages = [await context.new_page() for _ in range(5)]
            started = time.monotonic()
            await asyncio.gather(*(page.goto(link) for page in pages))
            for page in pages:
                page.set_default_timeout(self.timeout * 1000)
                answer = page.get_by_role("button", name=re.compile(r"Start \(")).or_(page.get_by_text("server is busy")) \
                    .or_(page.get_by_text("Masked scan of"))
                await answer.first.wait_for()
            self.stats.latencies["attacker: five tabs of a masked-map link (answered)"].append(time.monotonic() - started)
            self.stats.expected["attack answered: five tabs"] += 1
        except Exception as err:
            self.stats.fail(-2, "attack five tabs", f"{type(err).__name__}: {err}")
        finally:
            await context.close()

    async def run(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            for attack in self.attacks:
                if time.monotonic() >= deadline:
                    return
                await self.upload(*attack)
            if time.monotonic() < deadline:
                await self.five_tabs()
