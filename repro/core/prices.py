"""What a VM-hour costs: `--price-per-hour`, else the shipped table of Azure list prices (repro/data/prices.yaml).

A price is data with its basis (where it came from, the region and the date it was read), and never a guess: a VM
size the table does not list has no price, and the reason says how to give one.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from repro.core.errors import InputError
from repro.core.safeio import read_text_bounded, safe_yaml

PRICES_FILE = Path(__file__).resolve().parents[1] / "data" / "prices.yaml"
MAX_PRICE = 100_000.0  # USD per VM-hour: far above any VM; a larger figure is a typo


class PriceEntry(BaseModel):
    """One row of the price table."""

    model_config = ConfigDict(extra="forbid")

    vm_size: str = Field(min_length=1, description="Azure armSkuName, e.g. Standard_ND96isr_H100_v5")
    name: str = Field(min_length=1)
    region: str = Field(min_length=1, description="Azure armRegionName")
    usd_per_hour: float = Field(gt=0, le=MAX_PRICE)
    date: dt.date = Field(description="When the source listed this price")
    source: Literal["Azure Retail Prices API"]
    note: str | None = None

    @field_validator("usd_per_hour")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prices: list[PriceEntry]

    @field_validator("prices")
    @classmethod
    def _one_per_size(cls, rows: list[PriceEntry]) -> list[PriceEntry]:
        sizes = [r.vm_size.lower() for r in rows]
        if len(sizes) != len(set(sizes)):
            raise ValueError("a VM size is listed twice")
        return rows


def load_price_table(path: Path = PRICES_FILE) -> PriceTable:
    try:
        doc = safe_yaml(read_text_bounded(path, 1 << 20, what="price table"))
        return PriceTable.model_validate(doc)
    except (OSError, ValueError, yaml.YAMLError, ValidationError) as exc:
        raise InputError(f"{path}: not a valid price table ({str(exc).splitlines()[0]}).", "reinstall repro") from None


@functools.cache
def price_table() -> PriceTable:
    return load_price_table()


@dataclass(frozen=True)
class Price:
    """USD per VM-hour and, in words, where it came from."""

    usd_per_hour: float
    basis: str
    vm_size: str | None = None
    region: str | None = None
    date: str | None = None
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "usd_per_hour": self.usd_per_hour,
            "basis": self.basis,
            "vm_size": self.vm_size,
            "region": self.region,
            "date": self.date,
            "source": self.source,
        }


def check_price(value: float) -> float:
    """A price per hour the user typed: finite, above 0, at most MAX_PRICE; InputError (exit 2) otherwise."""
    if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0 or value > MAX_PRICE:
        raise InputError(
            f"--price-per-hour {value!r}: a price must be a finite number of USD above 0 and at most {MAX_PRICE:,.0f}.",
            "`repro report RESULT_DIR --price-per-hour 108.16`",
        )
    return float(value)


def resolve_price(per_hour: float | None, vm_size: str | None, vm_name: str | None = None) -> tuple[Price | None, str]:
    """(price, why) from --price-per-hour, else the table's row for the VM size; (None, why none) otherwise."""
    if per_hour is not None:
        value = check_price(per_hour)
        return Price(value, f"${value:,.2f} per VM-hour (--price-per-hour)", vm_size=vm_size), "given"
    what = vm_name or vm_size
    if not vm_size:
        return None, "no Azure VM size recorded for this run; pass --price-per-hour"
    row = next((r for r in price_table().prices if r.vm_size.lower() == vm_size.lower()), None)
    if row is None:
        return None, f"{what} has no price in the shipped Azure price table; pass --price-per-hour"
    basis = f"${row.usd_per_hour:,.2f} per VM-hour ({row.name}, {row.region}, {row.source}, {row.date.isoformat()})"
    return Price(row.usd_per_hour, basis, row.vm_size, row.region, row.date.isoformat(), row.source), "table"
