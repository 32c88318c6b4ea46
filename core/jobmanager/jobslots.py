"""The slots one job holds, after Flink's DeclarativeSlotPoolService: the allocations
offered to the job, the requests still out at the ResourceManager (``SlotRequestQueue``),
the TaskExecutor and host behind each TaskManager, and the requests and frees of one
mailbox turn batched into one SlotRequests.

Used on the JobMaster's main thread only; it sends, the scheduler decides.
"""

from __future__ import annotations

from collections.abc import Callable

from clusterdeck.core.executiongraph.execution import SlotRef
from clusterdeck.core.jobmanager.blocklist import Blocklist
from clusterdeck.core.jobmanager.slotrequests import SlotRequestQueue
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.gateways import ResourceManagerGateway
from clusterdeck.core.rpc.outbox import Outbox, send_in_halves

SLOT_MESSAGES_PER_BATCH = 256  # requests and frees in one SlotRequests
SLOT_REQUESTS_OUT = 128  # slot requests at the ResourceManager at once; the rest wait here
RESOURCE_MANAGER = "resourcemanager"


class JobSlots:
    def __init__(self, job_id: str, jobmaster_id: str, resource_manager: ResourceManagerGateway,
                 post: Callable[[Callable[[], None]], None], blocklist: Blocklist) -> None:
        """``post(fn)`` runs ``fn`` on the JobMaster's main thread after what its mailbox
        holds now (``run_async``): the end of this turn. ``blocklist``: TaskManagers whose
        slots the job's requests avoid."""
        self.job_id = job_id
        self.blocklist = blocklist
        self.jobmaster_id = jobmaster_id
        self.resource_manager = resource_manager
        self._post = post
        self._allocations: dict[SlotRef, str] = {}
        # Slot requests, a bounded number out at once; allocations freed at the
        # ResourceManager since, so that an offer crossing the free on its way is not taken.
        self._requests = SlotRequestQueue(SLOT_REQUESTS_OUT)
        self._withdrawn: set[str] = set()
        self._executors: dict[str, str] = {}  # TaskManager id -> TaskExecutor endpoint
        self.hosts: dict[str, str] = {}  # TaskManager id -> its host, for the snapshot
        self._messages: Outbox[str, p.RequestSlot | p.FreeSlot] = \
            Outbox(SLOT_MESSAGES_PER_BATCH)

    def request(self, attempt_id: str) -> None:
        """The attempt needs one more slot."""
        self._send_requests(self._requests.add(attempt_id))

    def withdraw(self, attempt_id: str) -> None:
        """The attempt runs in a slot the job held: its request goes on to the next
        attempt waiting for a slot, or, none waiting, is freed at the ResourceManager,
        waiting or (an offer on its way) allocated already."""
        allocation_id = self._requests.withdraw(attempt_id)
        if allocation_id is not None:
            self._withdrawn.add(allocation_id)
            self._to_resource_manager(p.FreeSlot(self.job_id, allocation_id))

    def offered(self, offer: p.OfferSlot) -> SlotRef | None:
        """The slot the job now holds, or None when the offer crossed a free of ours."""
        if offer.allocation_id in self._withdrawn:  # crossed our FreeSlot: no longer ours
            self._withdrawn.discard(offer.allocation_id)
            return None
        if offer.resource_id in self.blocklist:  # asked for before the block: ask again
            self._send_requests(self._requests.again(offer.allocation_id))
            self._to_resource_manager(p.FreeSlot(self.job_id, offer.allocation_id))
            return None
        self._send_requests(self._requests.answered(offer.allocation_id))
        slot = SlotRef(offer.resource_id, offer.slot_index)
        self._allocations[slot] = offer.allocation_id
        self._executors[offer.resource_id] = offer.endpoint_id
        self.hosts[offer.resource_id] = offer.host
        return slot

    def free(self, slot: SlotRef) -> None:
        allocation_id = self._allocations.pop(slot, None)
        if allocation_id is not None:
            self._to_resource_manager(p.FreeSlot(self.job_id, allocation_id))

    def allocation_id(self, slot: SlotRef) -> str:
        return self._allocations.get(slot, "")

    def taskmanager_lost(self, resource_id: str) -> None:
        for slot in [s for s in self._allocations if s.taskmanager_id == resource_id]:
            self._allocations.pop(slot)

    def taskmanagers(self) -> set[str]:
        """The TaskManagers the job holds slots of."""
        return {slot.taskmanager_id for slot in self._allocations}

    def knows(self, taskmanager_id: str | None) -> bool:
        """True once a slot of the TaskManager was offered: its TaskExecutor is known."""
        return taskmanager_id in self._executors

    def executor_id(self, taskmanager_id: str) -> str:
        """The endpoint id of the TaskManager's TaskExecutor."""
        return self._executors[taskmanager_id]

    def release_all(self) -> None:
        """The job ended: what is queued goes out, then every slot of the job is freed;
        its blocks end, their timers cancelled."""
        self.send()
        self.blocklist.end()
        self.resource_manager.release_job_slots(p.ReleaseJobSlots(self.job_id))
        self._allocations.clear()
        self._requests.clear()
        self._withdrawn.clear()

    def send(self) -> None:
        """The requests and frees queued this turn, as few SlotRequests as fit."""
        for _, batch in self._messages.take():
            # a single request or free too large for a frame: a frame far too small to run
            send_in_halves(batch, self._send_batch)

    def blocklist_changed(self) -> None:
        """The requests out go again with the blocklist of now: those still waiting at the
        ResourceManager take it (those it allocated meanwhile are offered as they are)."""
        self._send_requests(self._requests.out_allocations())

    def _send_requests(self, allocation_ids: list[str]) -> None:
        blocked = self.blocklist.blocked()
        for allocation_id in allocation_ids:
            self._to_resource_manager(p.RequestSlot(self.job_id, allocation_id,
                                                    self.jobmaster_id, blocked))

    def _to_resource_manager(self, message: p.RequestSlot | p.FreeSlot) -> None:
        """Queued: the slot requests and frees of this turn go in one SlotRequests."""
        if self._messages.add(RESOURCE_MANAGER, message):
            self._post(self.send)

    def _send_batch(self, batch: tuple[p.RequestSlot | p.FreeSlot, ...]) -> None:
        self.resource_manager.slot_requests(p.SlotRequests(
            tuple(m for m in batch if isinstance(m, p.RequestSlot)),
            tuple(m for m in batch if isinstance(m, p.FreeSlot))))
