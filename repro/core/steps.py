"""What a long step (setup, build-engine, run, verify) hands back, so the guided flow can chain them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

StepStatus = Literal["done", "skipped", "dry-run", "failed"]


class StepOutcome(BaseModel):
    step: str
    status: StepStatus
    summary: str
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status != "failed"

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
