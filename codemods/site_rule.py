"""Base class of the report-only rules: one finding per unclaimed sync site."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from .advice import ADVICE, advice, if_tensor, per_element, per_element_advice
from .model.context import FileContext
from .model.syncs import SyncSite
from .rule import Report, Rule, unclaimed


class SiteRule(Rule):
    kinds: ClassVar[tuple[str, ...]]

    def wants(self, ctx: FileContext, site: SyncSite) -> bool:
        return True

    def message(self, ctx: FileContext, site: SyncSite) -> str:
        return f"`{ctx.code(site.node)}` reads a tensor value on the host"

    def note(self, ctx: FileContext, site: SyncSite) -> str:
        return advice(ctx, site.node)

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        for site in unclaimed(sites, claimed, *self.kinds):
            if self.wants(ctx, site):
                if site.on_host:
                    note = ADVICE["on_host"]
                elif site.kind in ("item", "float", "int", "bool", "truth") and (iterable := per_element(ctx, site.value)):
                    note = per_element_advice(ctx, iterable)
                else:
                    note = self.note(ctx, site)
                note = if_tensor(ctx, site) + note
                yield Report(site.node, self.message(ctx, site), sites=[site], note=note)
