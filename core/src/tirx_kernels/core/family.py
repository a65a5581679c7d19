# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""What a family declares about itself: identity, license terms and upstream projects."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

# The files of a port family that are native TIRx code: its package markers and its plugin.
PORT_NATIVE_FILES = ("__init__.py", "plugin.py", "kernels/__init__.py")


@dataclass(frozen=True)
class Upstream:
    """An upstream project a family ports code from (pin the commit actually read)."""

    project: str  # display name used in port headers, e.g. "FlashInfer"
    url: str  # canonical repository URL, e.g. "https://github.com/flashinfer-ai/flashinfer"
    spdx: str  # the upstream's own SPDX expression, e.g. "Apache-2.0"
    copyright: str  # the upstream copyright notice a port header keeps
    commit: str = ""  # full 40-hex commit ports of this family cite
    # Other full commits a port may cite (a file re-ported from a newer upstream).
    other_commits: tuple[str, ...] = ()
    # Verbatim upstream license (and AUTHORS) texts, relative to the repository root;
    # empty means ``licenses/<repository name, lower case>-LICENSE.txt``.
    license_texts: tuple[str, ...] = ()

    @property
    def slug(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1].lower()

    @property
    def texts(self) -> tuple[str, ...]:
        return self.license_texts or (f"licenses/{self.slug}-LICENSE.txt",)


@dataclass(frozen=True)
class FileOverride:
    """A file whose terms differ from its family's (e.g. derived from BSD-3-Clause code)."""

    spdx: str
    required_text: tuple[str, ...] = ()  # verbatim lines that must appear in the file
    upstream: Upstream | None = None  # where the file comes from; None: the family's upstream


@dataclass(frozen=True)
class LicensePolicy:
    """How a family's files are licensed; the license audit reads only this.

    ``upstream`` None means a native family: every file carries the native header.
    Paths (``overrides`` keys, ``native_files``) are relative to the family's import package
    directory (``rmsnorm.py``); ``native_files`` entries may be ``fnmatch`` patterns.
    ``license_files`` are shipped in the wheel; the upstream texts (``Upstream.texts``) are
    shipped in addition, so a plugin need not repeat them.
    """

    expression: str  # PEP 639 expression of the distribution, e.g. "Apache-2.0 AND MIT"
    upstream: Upstream | None = None
    overrides: dict[str, FileOverride] = field(default_factory=dict)
    native_files: tuple[str, ...] = ()  # files of a port family that are genuinely native
    license_files: tuple[str, ...] = ("LICENSE", "NOTICE")  # relative to the distribution root
    # Who holds the copyright of the family's own code: every file's header says
    # "SPDX-FileCopyrightText: Copyright <holder>" (a third-party family names itself).
    copyright_holder: str = "TIRx authors"

    @property
    def native(self) -> bool:
        return self.upstream is None


@dataclass(frozen=True)
class Family:
    """A kernel family, one per distribution (``tirx-kernels-<name>``).

    ``category`` is what every kernel of the family puts in ``KERNEL_META["category"]``.
    """

    name: str
    category: str
    package: str  # import package holding the kernels, e.g. "tirx_kernels.basic"
    license: LicensePolicy
    description: str = ""

    def __post_init__(self):
        for attr in ("name", "category"):
            value = getattr(self, attr)
            if not isinstance(value, str) or not _NAME.match(value):
                raise ValueError(
                    f"family {attr} {value!r} must be lower_snake_case (letters, digits, _)"
                )
        if not isinstance(self.license, LicensePolicy):
            raise TypeError(f"family {self.name!r}: license must be a LicensePolicy")

    @classmethod
    def native_apache(cls, name: str, package: str, description: str = "") -> Family:
        """A family of native TIRx code under Apache-2.0 whose category is its name."""
        return cls(
            name=name,
            category=name,
            package=package,
            license=LicensePolicy(expression="Apache-2.0"),
            description=description,
        )

    @classmethod
    def port(
        cls,
        name: str,
        package: str,
        description: str,
        upstream: Upstream,
        native_files: tuple[str, ...] = PORT_NATIVE_FILES,
    ) -> Family:
        """A family of TIRx ports of ``upstream`` whose category is its name.

        Its distribution is Apache-2.0 AND the upstream's terms (Apache-2.0 alone for an
        Apache-2.0 upstream); ``native_files`` are the files that are native TIRx code.
        """
        terms = "Apache-2.0" if upstream.spdx == "Apache-2.0" else f"Apache-2.0 AND {upstream.spdx}"
        return cls(
            name=name,
            category=name,
            package=package,
            license=LicensePolicy(terms, upstream=upstream, native_files=native_files),
            description=description,
        )
