"""The slot protocol between a JobMaster and the ResourceManager: requests and frees
batched per mailbox turn, offers batched per assignment round."""

from __future__ import annotations

from dataclasses import dataclass

from clusterdeck.core.rpc import message


@message
@dataclass(frozen=True)
class RequestSlot:
    """JobMaster -> ResourceManager (tell): answered later by an OfferSlot. ``blocked``:
    TaskManagers the job blocked (``clusterdeck.core.jobmanager.blocklist``), none of whose
    slots may answer it. Sent again with the same allocation id when the job's blocklist
    changes: a request still waiting takes the new one and keeps its place."""

    job_id: str
    allocation_id: str
    jobmaster: str
    blocked: tuple[str, ...] = ()


@message
@dataclass(frozen=True)
class OfferSlot:
    """ResourceManager -> JobMaster: a free slot, now allocated to ``allocation_id``."""

    allocation_id: str
    resource_id: str
    endpoint_id: str
    host: str
    slot_index: int
    data_url: str = ""  # the TaskManager's data service, as it registered it
    data_fingerprint: str = ""
    data_key: str = ""
    stream_address: str = ""  # its channel server, as it registered it


@message
@dataclass(frozen=True)
class FreeSlot:
    """JobMaster -> ResourceManager (tell): the allocation is no longer needed."""

    job_id: str
    allocation_id: str


@message
@dataclass(frozen=True)
class SlotRequests:
    """JobMaster -> ResourceManager (tell): the slot requests and frees of one turn of
    the JobMaster's mailbox. The ResourceManager takes the requests first (a free may
    withdraw a request of the same batch), then the frees, then offers what it can."""

    requests: tuple[RequestSlot, ...] = ()
    frees: tuple[FreeSlot, ...] = ()


@message
@dataclass(frozen=True)
class OfferSlots:
    """ResourceManager -> JobMaster (tell): the slots allocated to its requests in one
    assignment round, oldest request first."""

    offers: tuple[OfferSlot, ...]


@message
@dataclass(frozen=True)
class ReleaseJobSlots:
    """JobMaster -> ResourceManager (tell): the job ended; drop its requests and slots."""

    job_id: str
