"""OpenClaw's workspace templates, recognised so that an import leaves them out.

OpenClaw writes its templates (`USER.md`, `AGENTS.md`, `SOUL.md`, …; `docs/reference/templates` in
its package, front matter removed) into every new workspace. Imported as they are, their instructions
and example directives ("Prefer ...", `<!-- observed: YYYY-MM-DD | status: active -->`) became
memories and were recalled for every user of the agent. A section is template text when its words
are those of a section of a shipped template: compared by fingerprint (a hash of its normalised
text, so no template text is copied here) with the templates of the OpenClaw release this was
checked against (`SHIPPED`, pinned by a test against the installed package) and with those of an
OpenClaw found on this machine (`openclaw` on PATH), whatever its release.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Iterable

from .sections import sections

# The section fingerprints of openclaw@2026.9.6's templates (every `docs/reference/templates/*.md`).
SHIPPED = frozenset("""
    004469b974dc85b2 0087c6f7d0f646bd 01f5333261ff05b3 01fb717dcfb7b5b2 04b27625a2573083 071d12a3b2a5e6b4
    084dcc5ca3f85d48 0868309977a1f151 0a230a223b73d922 0b656fce638621ce 0dc053ffb84e81af 11fa8f65fa951372
    126572ec4c12874a 12dafe5924d795f1 1404b4b079f0c938 142a14fc9ae680d1 15ff3285da72df5d 1757d65fc36ad457
    17b098abe07f1f0c 188aed18a3dddcc4 18b712253f16c97a 1adec6ac94762177 1bc3f04dc9296469 1d6e7a3ef3f96057
    1e959adecdc5b12b 20979ac8243460bf 2098dc65fcde95d5 20c06ed4f86ea990 238e993cf090bcf1 24243c92d3b5be88
    243c2de83f608bfd 24eef0d3379421d0 25f039f590a481e8 26c5216c3e65ce4b 26ca18eb06a13efe 26cc0b7f60771cd7
    26f8195d6267df70 27ae6a4abf790cc4 28693943c29fe278 297efd8c18a73deb 2bb82713c0bb4def 2bd732f9b6d761f8
    2c9ab31c6a801d81 2d34d2c64f273bd9 2e2721587c75f21d 2f181493c96e3a7c 2f9ab8923e6784f4 2fe75919525f831c
    313f3e889dd00b07 3184b8917157754c 352f3ea0eb5dab49 3588ebe34ff8c07d 3699e0242d75b007 38248f8397432417
    384ac7607c4bd218 38c3620054b43c21 3a0e1e4f41f6cdc3 3fccc40729855592 403139d17ccda045 403ac7ef914c6023
    4045690c9a0414e3 40bfff9140a5f108 40e3c605b1e29f5e 456b1560f0015ce4 4707ab194ad2772e 48eee0e8587b3d56
    4aa3bf035c0c3f60 4c687f285dd77d65 4c71e8532bc29ce0 4c79943c59c7abde 4cf877b22ff441b4 4d1a3e574af85170
    4ea7ed7084a4ac62 5276aa486905852d 55aa27024d1db753 56c2e7a89aff9908 5788562fa84078a9 582436337ec1e030
    589f302789503f18 5a608a92d96b312d 5bc10f0fe85e93d9 5c37026dbc9e1a1a 5c9c63a6776201c4 5f311146b50bf9a3
    6357d401410aa59e 638187278333dab5 68aa905cc19445f9 692f391eae451c66 6af603b712498698 6c4fc56897e3bc35
    6e6e29b795d6b778 6e6ed987a77faa3e 7082b309b8a675ff 70b1dcf9c78fc2dd 70e71b77b7dd3828 712c85b05d6ed927
    7212cfc77d378e29 7236160914e39767 7300681ad2659561 733dd8a1dc952664 73de5b35b339c55b 7464a893587b01e6
    757a0903658f8db4 7724b7381df330c5 774a8d34bb2fc51e 7860ff3990c856d0 78b0a1cd35fc43c8 7a9ac0e45c810d2a
    7cd0b84520d10473 7d67ca987eb1c2c8 80504fb0d06a5a1f 81551b5fd664f586 8232cdb33ad9ca7b 827ae0bcedb29b19
    8452e280d763f6d3 84607048b0c2fc21 858ca5dc37cd4089 85923b5a88594aa4 8598a55cb73c3fe9 8660afac28428aa2
    8753357ddb23ab2c 87ccbac899668b9a 88147de3294afe01 88daaf0a8d87ca4b 8a35016e5f968711 8a813bae8b0b3662
    8a8ae35fbb5be592 8c18afa918846ac5 8cc7a9c5d45b57e5 8dc38c680c266d5b 8dc9d6ebc6195d0e 8de4e2a724c51d1d
    8df70b303cda29ee 8e035deda8797fff 8ed72575d939dd1b 8f7632d3c3678117 90a59877b6775dcd 91170d8ce4e2480e
    940e31b2fc0d1bcc 9498c92a59af76f8 94c8e89147ab22e9 94f733c3f219385c 958ceea6efc3ffdf 96c5902b456c1215
    976aa77b9debf4cb 998e652267e53f08 99ddd47ab2b46b62 99f9ed3c2eb0bd7c 9a5ca4ee7ecc9cfb 9b08a2d7eb55223d
    9c0d927d341ec857 9d9568e34a9cba4c a1b0f4fe50059b3a a25409ae912ef2c2 a36ac62ac5753505 a36eb62c11d5bafd
    a3f255bff816d9d1 a47e2f007e7ef3bf a48f54c89b45d876 a6a05b782f48290f a729b6d0942482e9 a86f742fff6e02d1
    a8f272bc8d1c797d a907a1816e9b3f0a aa1674fcc9f349d1 ab6349e70b7915d3 ac95a2bcdea50d56 b124ad1a04da2a88
    b207ced56fac6fd9 b458156e9dcf7974 b57ed30b1292e488 b7828bc903b906ee b8d581fc8b079baa ba8d537aa9d900e6
    bc9c40775420e5f5 bee85f193dd3428a bf6796817b486018 c0db7d30f517f5f3 c22170bc15db3158 c41e2b0d3a86001f
    c9b5554dd312cf29 caafb129ea82ea3c cb3f91d54eee30e5 ce0cf46a8674c3cd d14b97b71c501980 d4fd1a03fd07ef2e
    d61edcae5ef1c7b6 d725cd23210a5a4b d867cba4ad469d7a d8a70bd7b49f6706 dbcd77da7bc4b2fb dc7fe018bc4e21b7
    dd4d9de909463f55 e13c704f4a7a26aa e368adc300fde5c0 e38347f08be564bf e45cde53a51367d8 e5143b8115ecdd14
    e65d2f4ea6b08d72 e776dd3cd549da03 e88700badcc5c52d e95334728e2daafc e9f7cfccd438b5fb ea0f2bf1526ba76d
    ea7de41486ecdfff eab40cac35e4af32 eaf39efbfda43460 eafc8fb0b5fad8e9 eb0e972ed3be152d eb1bcf5950d32ef4
    ec51d668aced926a ecf5bdc91fc24756 ed6498dc479ba8eb ee21cce9900e9ece eef9127faca0b639 ef063da00ca74aac
    f0687b1af28d9393 f08619999397691c f0d45862decaffa3 f0d7fa63435606cd f0f2c1b1627e5662 f179f3d16251cdd5
    f21351deddfba5a5 f3263e2e86060b9c f32df04e2d478a95 f41934ba12532322 f67ab85c51cd17ec f872344d5f7274dd
    f88e2a7be4338c4e f8d1e9389f16038b fa05a22dc179fc1c fa4d4942dd48676f fa893b57f69229aa fc2fc86fe0286c5d
    fe3795c4d24e15a8 fecb1a269e071db0
""".split())

_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n\s*", re.DOTALL)


def fingerprint(section: str) -> str:
    """A section's text, spaces and letter case aside, as 16 hex digits."""
    return hashlib.sha256(" ".join(section.split()).casefold().encode()).hexdigest()[:16]


def fingerprints(markdown: Iterable[str]) -> frozenset[str]:
    """The fingerprints of every section of these templates, as OpenClaw writes them (no front matter)."""
    return frozenset(fingerprint(s.text) for text in markdown for s in sections(_FRONT_MATTER.sub("", text, count=1)))


def template_dir(openclaw: str | None = None) -> Path | None:
    """The templates folder of the OpenClaw installed here (`openclaw` on PATH, through its symlinks), or None."""
    found = openclaw or shutil.which("openclaw")
    if found is None:
        return None
    for folder in Path(os.path.realpath(found)).parents:
        candidate = folder / "docs" / "reference" / "templates"
        if candidate.is_dir():
            return candidate
        if (folder / "package.json").is_file() and folder.name == "openclaw":
            return None
    return None


@functools.lru_cache(maxsize=1)
def known() -> frozenset[str]:
    """`SHIPPED`, and the fingerprints of the templates of the OpenClaw installed here, read once."""
    folder = template_dir()
    if folder is None:
        return SHIPPED
    try:
        return SHIPPED | fingerprints(p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md")))
    except OSError:  # unreadable: the shipped fingerprints still apply
        return SHIPPED
