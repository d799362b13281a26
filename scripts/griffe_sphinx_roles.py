"""A griffe extension for the documentation build (``mkdocs.yml``): the package's docstrings cross-reference with
Sphinx roles (``:class:`~..policy.RetryPolicy```, ``:func:`decide```), which mkdocstrings would print as they are.
This turns each into an mkdocs-autorefs reference, resolved the way Python resolves a relative import from the
object's module (``.x``: this package, ``..x``: its parent) or, without a leading dot, in the object's scope.

* A target that exists in the package becomes a link when the API reference renders it, and plain code otherwise
  (a private helper, a module the reference leaves out).
* A target that names something of the package that does not exist is a warning, so ``mkdocs build --strict``
  fails on a stale or misspelt reference; a target outside the package (``airflow.sdk.BaseOperator``) is code.
* RST's ``::`` before a literal block becomes ``:``: Markdown takes the indented block as code.

Used only to build the docs; the package does not import it.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")
LITERAL_BLOCK = re.compile(r"(\S)::\n")
PACKAGE = "airflow_provider_resilient"


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring of the package once it is loaded (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.path != PACKAGE:
            return
        self.pkg = pkg
        for obj in _walk(pkg):
            if obj.docstring is not None:
                text = ROLE.sub(lambda match, obj=obj: self._reference(obj, match), obj.docstring.value)
                obj.docstring.value = LITERAL_BLOCK.sub(r"\1:\n", text)

    def _reference(self, obj: griffe.Object, match: re.Match[str]) -> str:
        role, short, target = match.groups()
        shown = target.lstrip(".")
        if short:
            shown = shown.rsplit(".", 1)[-1]
        if role in ("func", "meth"):
            shown += "()"
        code = f"<code>{html.escape(shown)}</code>"
        path = self._resolve(obj, target)
        if path is None:
            griffe.logger.warning(f"{obj.relative_filepath}:{obj.lineno}: cross-reference {match.group(0)} in "
                                  f"{obj.path} names nothing in the package")
            return code
        if not path.startswith(PACKAGE):  # outside the package: code, no link
            return code
        return f'<autoref identifier="{path}" optional>{code}</autoref>'

    def _resolve(self, obj: griffe.Object, target: str) -> str | None:
        """The full path of ``target`` as seen from ``obj``: an object of the package, a path outside it (returned
        as it is), or None when it names nothing of the package."""
        if target.startswith("."):
            dots = len(target) - len(target.lstrip("."))
            module = obj.module
            base = module if module.is_init_module else module.parent
            for _ in range(dots - 1):
                base = base.parent if base is not None else None
            if base is None:
                return None
            return self._existing(f"{base.path}.{target[dots:]}")
        if target.startswith(PACKAGE + ".") or target == PACKAGE:
            return self._existing(target)
        head, _, rest = target.partition(".")
        scope: Any = obj
        while scope is not None:
            members = _members(scope)
            if head in members:
                member = members[head]
                path = member.target_path if member.is_alias else member.path
                if not path.startswith(PACKAGE):
                    return f"{path}.{rest}" if rest else path
                return self._existing(f"{path}.{rest}" if rest else path)
            scope = scope.parent
        return target if "." in target else None  # a dotted path outside the package, or a name nothing defines

    def _existing(self, path: str) -> str | None:
        if not path.startswith(PACKAGE + ".") and path != PACKAGE:
            return None
        try:
            found = self.pkg[path[len(PACKAGE) + 1:]] if path != PACKAGE else self.pkg
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
        if found.is_alias:
            try:
                return found.final_target.path
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                return found.target_path
        return found.path


def _members(scope: Any) -> Any:
    """A scope's members; a class's inherited ones too (when its bases resolve)."""
    if scope.is_class:
        try:
            return scope.all_members
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            pass
    return scope.members


def _walk(obj: griffe.Object):  # type: ignore[no-untyped-def]
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)  # type: ignore[arg-type]
