"""A dated, sourced cloud price for one GPU of an instance type."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuplan.specs._base import SourcedSpec


PricingModel = Literal["on-demand", "reserved", "capacity-block", "spot"]


class CloudPrice(SourcedSpec):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")  # provider-instance, e.g. aws-p5-48xlarge
    provider: str
    instance: str
    gpu: str  # GPU id
    gpus: int = Field(gt=0)
    usd_per_gpu_hour: float = Field(gt=0)  # on-demand unless `pricing_model` says otherwise
    reserved_usd_per_gpu_hour: float | None = Field(default=None, gt=0)
    #: the reservation's term as the source states it ("1-year", "3-year"); None: not stated
    reserved_term: str | None = None
    region: str | None = None
    date: str  # ISO date the price was read
    name: str = ""
    #: what kind of price `usd_per_gpu_hour` is
    pricing_model: PricingModel = "on-demand"
