"""The extender's verbs, independent of the HTTP framework.

Each verb takes the raw request body and returns the encoded reply. Contract:

* bad input gets a specific message in the reply (``Error`` for filter and
  bind, all-zero scores for prioritize) and changes nothing;
* ``filter`` answers ``Error`` only while the cluster view is not yet synced
  (approving pods against an empty ledger would double-allocate) or when the
  body is not an ``ExtenderArgs``; a pod that does not fit is never an error;
* ``filter`` remembers the Pod by UID so that ``bind``, which receives only
  names, can read its request (required for the embedded cluster, and saves
  an API read with a real one);
* with ``score_all_pods`` (for a kube-scheduler configured without
  ``managedResources``, so that it asks about every pod) a pod without a
  shared-GPU request is still passed through by filter and bound untouched,
  but the strategy sees it and prioritize scores it as a request for no GPU
  (its CPU and memory): fragmentation-aware placement of CPU-only pods.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
import numpy as np
import orjson

from extender.cluster.base import ClusterError, NotLeading
from extender.ledger import annotations as A
from extender.ledger.budgets import violations
from extender.ledger.defrag_facts import controller_key, facts_of
from extender.ledger.ledger import Ledger
from extender.ledger.podinfo import labels_of, priority_and_start
from extender.ledger.records import BindRejected, PodRef
from extender.logs import fields, get_logger
from extender.verbs import wire
from extender.verbs.nodelists import NodeLists
from extender.verbs.outcomes import Outcomes
from extender.verbs.replies import ReplyWriter
from extender.views import mapfeed
from extender.views.defrag_plan import Defragged, defrag_of
from extender.views.planning import PlanCache, Planned, PlanSettings, plan_of
from extender.views.stranded import StrandedMeter, annotate
from extender.views.stranded import summary as stranded_summary
from policy.defrag import DEFAULT_MAX_MOVES
from policy.defrag.movable import DEFRAG_ANNOTATION
from policy.fragmentation.shapes import ShapeMix
from policy.reasons import FITS
from policy.request import (GPURequest, InvalidRequest, host_request, host_requests, parse_pod_request, slim_containers,
                            request_fields)
from policy.victims import Resident, keep_proposal, select

PREEMPT_SECONDS = 2.0  # longest a preempt call weighs candidates (at ~1.5 ms a crowded node: ~1,300 of them)
NOT_SYNCED = "the GPU-share extender has not finished its first sync with the cluster; retry shortly"


class Seen:
    """A Pod seen by filter and what :func:`parse_pod_request` made of it: a
    :class:`GPURequest`, None (no shared GPU) or the :class:`InvalidRequest`.

    Of the Pod only what bind reads is kept: its identity and its containers'
    requests (a Pod as the scheduler sends it carries managedFields, status and
    more, several KiB that thousands of cached pods would hold for nothing).
    """

    __slots__ = ("pod", "version", "request")

    def __init__(self, pod: dict, request):
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        kept_spec = {} if isinstance(request, InvalidRequest) else {  # bind refuses it: keep only who it is
            k: slim_containers(spec[k]) if k in _CONTAINER_LISTS else spec[k] for k in _KEPT_SPEC if k in spec}
        kept_meta = {k: meta[k] for k in _KEPT_METADATA if k in meta}
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and (ours := {k: annotations[k] for k in A.ALL_KEYS if k in annotations}):
            kept_meta["annotations"] = ours  # bind clears those its allocation does not set
        if isinstance(annotations, dict) and DEFRAG_ANNOTATION in annotations:  # defragmentation's opt-out
            kept_meta.setdefault("annotations", {})[DEFRAG_ANNOTATION] = annotations[DEFRAG_ANNOTATION]
        self.pod = {"metadata": kept_meta, "spec": kept_spec}
        self.version = meta.get("resourceVersion")
        self.request = request


_KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels", "ownerReferences")
# priority for preemption; nodeSelector, affinity and tolerations: where defragmentation may move the pod
_KEPT_SPEC = ("containers", "initContainers", "overhead", "priority", "nodeSelector", "affinity", "tolerations")
_CONTAINER_LISTS = ("containers", "initContainers")  # kept as name and resources only (no env, no command)
MAX_FIELDS_KEY = 64 * 1024  # bytes: a pod whose parsed fields are larger is parsed, not remembered by them
_UNKNOWN = object()


def _uid(pod: dict) -> str | None:
    """The pod's UID, None when it has none (or not a string)."""
    uid = (pod.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) and uid else None


class Recent:
    """The last ``size`` values put, by key (the least recently put is dropped first)."""

    def __init__(self, size: int):
        self._size = size
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key, value) -> bool:
        """Remember ``value``; True when the key is new."""
        with self._lock:
            new = key not in self._items
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            return new

    def get(self, key, default=None):
        with self._lock:
            return self._items.get(key, default)


class Extender:
    def __init__(self, ledger: Ledger, cluster, clock=time.time_ns, pod_cache_size: int = 10000,
                 score_all_pods: bool = False, planning: PlanSettings | None = None):
        self.score_all_pods = score_all_pods
        self.preempt_seconds = PREEMPT_SECONDS
        self.observed = 0  # new pods whose request shapes were learned (see generation)
        self.planning = planning or PlanSettings()
        self.plans = PlanCache(lambda: plan_of(self.ledger, self.planning, self.ledger.strategy, self.budgets))
        self.placeholders = None  # extender.cluster.kube.placeholders.Placeholders, with --scale-up-placeholders
        self.defrag_max_moves = DEFAULT_MAX_MOVES  # GET defrag's plan size unless asked otherwise
        self.defragger = None  # extender.defrag.executor.Executor, with --defrag-execute
        self.leadership = None  # extender.cluster.leadership.Leadership, with leader election (None: always the leader)
        self.ledger = ledger
        self.cluster = cluster
        self.clock = clock
        self.pods = Recent(pod_cache_size)  # UID → Seen
        self._by_fields = Recent(1024)  # request_fields of a pod, encoded → what parsing it gave
        self.lists = NodeLists(ledger.state)
        self.replies = ReplyWriter(self.lists)
        self._pod_locks = [threading.Lock() for _ in range(64)]
        self.log = get_logger()
        self.outcomes = Outcomes()
        # the workload's shape mix, learned from the pods filter sees: the strategy's own if it learns one
        self.mix = getattr(ledger.strategy, "mix", None)
        self._own_mix = not isinstance(self.mix, ShapeMix)
        if self._own_mix:
            self.mix = ShapeMix()
        self.stranded = StrandedMeter(ledger.state, self.mix)

    def ready(self) -> bool:
        return self.cluster.ready()

    def generation(self) -> tuple:
        """Changes so far to what inspect and plan show: the ledger's, and the pod shapes learned."""
        return self.ledger.changes, self.observed

    def refusal(self) -> str | None:
        """None while this replica answers the verbs; else why not (a standby, catching up, its
        lease lapsed: extender.cluster.leadership), the ``Error`` of its 503 replies."""
        return self.leadership.refusal() if self.leadership is not None else None

    def serving(self) -> bool:
        """Synced, and the leader (or leader election is off)."""
        return self.ready() and self.refusal() is None

    def _parsed(self, pod: dict):
        """The pod's :class:`GPURequest`, None, or its :class:`InvalidRequest` (returned, not
        raised). Known by UID and ``resourceVersion`` (the API server changes the
        version with every change to the pod), else by the fields parsing reads
        (replicas of one workload share them), else parsed."""
        uid, version = _uid(pod), (pod.get("metadata") or {}).get("resourceVersion")
        seen = self.pods.get(uid) if uid and version else None
        if seen is not None and seen.version == version:
            return seen.request
        try:
            fields_key = orjson.dumps(request_fields(pod))
        except TypeError:  # not JSON-encodable as it stands: parse it, keep nothing
            fields_key = None
        if fields_key is not None and len(fields_key) > MAX_FIELDS_KEY:
            fields_key = None
        parsed = self._by_fields.get(fields_key, _UNKNOWN) if fields_key is not None else _UNKNOWN
        if parsed is _UNKNOWN:
            try:
                parsed = parse_pod_request(pod)
            except InvalidRequest as exc:
                # kept in caches: without its traceback, whose frames hold the whole request
                parsed = exc.with_traceback(None)
                parsed.__context__ = parsed.__cause__ = None
            if fields_key is not None:
                self._by_fields.put(fields_key, parsed)
        return parsed

    def _remember(self, pod: dict, parsed, scored: GPURequest | None) -> None:
        """Cache the pod and its parsed request for bind; let a learning strategy see
        each new pod's ``scored`` request once."""
        uid = _uid(pod)
        if uid and self.pods.put(uid, Seen(pod, parsed)) and scored is not None:
            self.observed += 1
            observe = getattr(self.ledger.strategy, "observe", None)
            if observe is not None:
                observe(scored)
            if self._own_mix:
                self.mix.observe(scored)

    def _scored(self, pod: dict, request):
        """What filter and prioritize place: the pod's GPU request, or with
        ``score_all_pods`` its CPU and memory as a request for no GPU; None for neither."""
        if request is None and self.score_all_pods:
            return host_request(*host_requests(pod))
        return request if isinstance(request, GPURequest) else None

    def _owner(self, pod: dict) -> str | None:
        """The pod's controller while defragmentation holds room (its replacement may be this pod)."""
        return controller_key(pod) if self.ledger.defrag_holds else None

    # -- filter ----------------------------------------------------------------
    def _rows(self, args: wire.ExtenderArgs):
        """``(rows, layout)`` of the request's node names; WireError for non-names."""
        try:
            return self.lists.rows(args)
        except TypeError:
            raise wire.WireError(wire.NAMES_NOT_A_LIST) from None

    def filter(self, body: bytes) -> bytes:
        """The ``ExtenderFilterResult`` for an ``ExtenderArgs`` body, encoded."""
        try:
            args = wire.parse_extender_args(body)
            rows, layout = self._rows(args)
        except wire.WireError as exc:
            self.log.warning("filter: bad request", extra=fields(error=str(exc)))
            self.outcomes.errored("filter", "bad_request")
            return wire.encode(wire.filter_error(str(exc)))
        if not self.ready():
            self.outcomes.errored("filter", "not_ready")
            return wire.encode(wire.filter_error(NOT_SYNCED))
        parsed = self._parsed(args.pod)
        request = self._scored(args.pod, parsed)
        self._remember(args.pod, parsed, request)
        if isinstance(parsed, InvalidRequest):
            self.log.info("filter: invalid request", extra=fields(pod=str(PodRef.of(args.pod)), error=str(parsed)))
            self.outcomes.refused_invalid(len(args.names))
            return wire.encode(wire.filter_reply([], [] if args.nodes is not None else None, {},
                                                 dict.fromkeys(args.names, str(parsed))))
        if request is None or request.gpu_count == 0:
            codes, key = np.zeros(len(rows), dtype=np.int8), None
        else:
            codes, key = self.ledger.check_rows(request, rows), request.fit_key
            held = self.ledger.hold_back(request, rows, codes, priority_and_start(args.pod)[0], _uid(args.pod),
                                         owner=self._owner(args.pod))
            if held is not codes:  # nodes hold room for a preemptor: this reply is not the fit's alone
                codes, key = held, None
        self.outcomes.filtered(codes)
        passed = codes == FITS
        if np.count_nonzero(passed) > 1:  # kube-scheduler asks prioritize about exactly these nodes
            self.lists.remember(np.compress(passed, rows), layout)
        return self.replies.filter(args, rows, layout, codes, key)

    # -- prioritize ------------------------------------------------------------
    def prioritize(self, body: bytes) -> bytes:
        """The ``HostPriorityList`` for an ``ExtenderArgs`` body, encoded (``[]`` for a bad body)."""
        try:
            args = wire.parse_extender_args(body)
            rows, layout = self._rows(args)
        except wire.WireError as exc:
            self.log.warning("prioritize: bad request", extra=fields(error=str(exc)))
            self.outcomes.errored("prioritize", "bad_request")
            return b"[]"
        request = self._scored(args.pod, self._parsed(args.pod))
        if request is None or not self.ready():
            if request is not None:
                self.outcomes.errored("prioritize", "not_ready")
            return self.replies.prioritize(args, rows, layout, None)
        evaluation = self.ledger.evaluate_rows(request, rows)
        held = self.ledger.hold_back(request, rows, evaluation, priority_and_start(args.pod)[0], _uid(args.pod),
                                     owner=self._owner(args.pod))
        return self.replies.prioritize(args, rows, layout, held, request.placement_key if held is evaluation else None)

    # -- bind ------------------------------------------------------------------
    # -- preempt -----------------------------------------------------------------
    def preempt(self, body: bytes) -> tuple[bytes, int]:
        """The ``ExtenderPreemptionResult`` for an ``ExtenderPreemptionArgs`` body, encoded, and
        the HTTP status (400 with an ``Error`` for a body that is not one: the result has no
        field for it).

        Per candidate node: kube-scheduler's victims when taking them out makes the pod
        fit its GPUs (they may also free CPU or memory it needs); else the victims
        :func:`policy.victims.select` finds among the node's pods of lower priority;
        the node is left out when no set of them makes room. A pod that asks for no
        shared GPU keeps kube-scheduler's answer; an invalid one gets no node. Candidates
        are weighed for at most ``preempt_seconds`` (well inside kube-scheduler's
        ``httpTimeout``); those not reached by then are left out (omitting a node
        only rejects it)."""
        try:
            args = wire.parse_preemption_args(body)
        except wire.WireError as exc:
            self.log.warning("preempt: bad request", extra=fields(error=str(exc)))
            self.outcomes.errored("preempt", "bad_request")
            return wire.encode({"Error": str(exc)}), 400
        if not self.ready():
            self.outcomes.errored("preempt", "not_ready")
            return wire.encode({"Error": NOT_SYNCED}), 503
        parsed = self._parsed(args.pod)
        if parsed is None:
            return wire.encode(wire.preemption_reply(args.victims)), 200
        if isinstance(parsed, InvalidRequest):
            return wire.encode(wire.preemption_reply({})), 200
        priority, _ = priority_and_start(args.pod)
        self.log.debug("preempt", extra=fields(pod=str(PodRef.of(args.pod)), priority=priority))
        budgets = None
        result = {}
        deadline = time.monotonic() + self.preempt_seconds
        for considered, (node, (proposed, counted)) in enumerate(args.victims.items()):
            if time.monotonic() > deadline:  # kube-scheduler waits httpTimeout at most: answer what is found
                self.log.warning("preempt: deadline reached; the other candidate nodes are left out", extra=fields(
                    pod=str(PodRef.of(args.pod)), candidates=len(args.victims), considered=considered,
                    kept=len(result), seconds=self.preempt_seconds))
                break
            found = self.ledger.residents(node)
            if found is None:
                continue
            row, allocations = found
            residents = [Resident(a.pod.uid, a.priority, a.start, a.memory_per_gpu, a.core_per_gpu, a.wants_core)
                         for a in allocations]
            chosen = keep_proposal(row, parsed, residents, proposed)
            if chosen is not None:
                if proposed:
                    result[node] = (proposed, counted)
                continue
            if budgets is None:
                budgets = self.budgets()
            by_uid = {a.pod.uid: a for a in allocations}
            disrupts = dict(zip(by_uid, violations([(a.pod.namespace, a.labels) for a in allocations], budgets)))
            residents = [Resident(r.uid, r.priority, r.start, r.memory, r.core, r.wants_core, disrupts[r.uid])
                         for r in residents]
            victims = select(row, parsed, priority, residents)
            if victims:
                result[node] = (list(victims), sum(disrupts[u] for u in victims))
        self.log.info("preempt", extra=fields(pod=str(PodRef.of(args.pod)), candidates=len(args.victims),
                                              kept=len(result)))
        return wire.encode(wire.preemption_reply(result)), 200

    def bind(self, body: bytes) -> bytes:
        try:
            args = wire.parse_binding_args(body)
        except wire.WireError as exc:
            self.log.warning("bind: bad request", extra=fields(error=str(exc)))
            self.outcomes.bound("invalid")
            self.outcomes.errored("bind", "bad_request")
            return wire.encode(wire.bind_reply(str(exc)))
        ref = PodRef(args.uid, args.namespace, args.name)
        result, error = self._bind(args, ref)
        self.outcomes.bound(result)
        if result == "not_ready":
            self.outcomes.errored("bind", "not_ready")
        if error:
            self.log.info("bind refused", extra=fields(pod=str(ref), uid=ref.uid, node=args.node, error=error))
        return wire.encode(wire.bind_reply(error))

    def _bind(self, args: wire.BindingArgs, ref: PodRef) -> tuple[str, str]:
        """``(result, error)``: one of :data:`extender.verbs.outcomes.BIND_RESULTS` and the reply's ``Error``."""
        if not self.ready():
            return "not_ready", NOT_SYNCED
        # One bind per pod at a time: kube-scheduler may retry a pod whose earlier
        # bind is still running, and a failed Binding is read back before the share is released.
        with self._pod_locks[hash(ref.uid) % len(self._pod_locks)]:
            refusal = self.refusal()  # again: this bind may have waited here while the lease was lost
            if refusal is not None:
                return "not_leader", refusal
            return self._bind_locked(args, ref)

    def _bind_locked(self, args: wire.BindingArgs, ref: PodRef) -> tuple[str, str]:
        existing = self.ledger.allocation(ref.uid)
        if existing is not None and existing.node != args.node:
            result, error = self._replace_stale(existing, ref)
            if error:
                return result, error
        seen = self.pods.get(args.uid)
        if seen is None:
            pod = self.cluster.get_pod(args.namespace, args.name, args.uid)
            if pod is None:
                return "invalid", (f"pod {ref} (uid {ref.uid}) is unknown to the extender: bind needs the Pod "
                                   "from a preceding filter call")
            seen = Seen(pod, self._parsed(pod))
        pod, request = seen.pod, seen.request
        meta = pod.get("metadata") or {}
        if (meta.get("name"), meta.get("namespace") or "default") != (ref.name, ref.namespace):
            return "invalid", (f"pod uid {ref.uid} belongs to {meta.get('namespace') or 'default'}/"
                               f"{meta.get('name')}, not {ref}")
        if isinstance(request, InvalidRequest):
            return "invalid", str(request)
        allocation, created = None, False
        if request is not None:
            try:
                priority, start = priority_and_start(pod)
                allocation, created = self.ledger.reserve(ref, request, args.node, self.clock(), priority, start,
                                                          owner=controller_key(pod))
                allocation.labels = labels_of(pod)
                allocation.facts = facts_of(pod)
            except BindRejected as exc:
                return "refused", str(exc)
        try:
            self.cluster.bind(pod, args.node, allocation.annotations if allocation else {})
        except ClusterError as exc:
            if created and not exc.ambiguous:
                self.ledger.release(ref.uid)
            if isinstance(exc, NotLeading):  # checked right before the write: nothing was sent
                return "not_leader", f"binding pod {ref} to node {args.node} was not sent: {exc}"
            elif exc.ambiguous:
                self.log.warning("bind outcome unknown; the reservation is kept", extra=fields(
                    pod=str(ref), uid=ref.uid, node=args.node, error=str(exc)))
            return "failed", f"binding pod {ref} to node {args.node} failed: {exc}"
        if allocation is not None:
            allocation.committed = True
            if self.log.isEnabledFor(logging.INFO):
                self.log.info("bound", extra=fields(pod=str(ref), uid=ref.uid, node=args.node,
                                                    gpus=sorted(allocation.memory_per_gpu)))
        return "bound", ""

    def _replace_stale(self, existing, ref: PodRef) -> tuple[str, str]:
        """A pod reserved on another node: refuse, unless that reservation never took effect.

        A reservation neither committed (our Binding succeeded) nor confirmed
        (the cluster showed the pod there) is left from a bind whose outcome
        was unknown. It is released only if the cluster shows the pod unbound
        now; otherwise the pod keeps the node it has.
        """
        if existing.committed or existing.confirmed:
            return "refused", f"pod {ref} is already bound to node {existing.node}"
        try:
            holder = self.cluster.pod_node(ref.namespace, ref.name, ref.uid)
        except ClusterError as exc:
            return "failed", f"cannot tell whether pod {ref} is already bound to node {existing.node}: {exc}"
        if holder is not None:
            existing.committed = holder == existing.node
            return "refused", f"pod {ref} is already bound to node {holder}"
        self.ledger.release(ref.uid)
        self.log.info("released a reservation whose bind never took effect", extra=fields(
            pod=str(ref), uid=ref.uid, node=existing.node))
        return "", ""

    # -- autoscaling and defragmentation plans ----------------------------------
    def budgets(self) -> list:
        """The cluster's PodDisruptionBudgets ([] for a backend that has none)."""
        read = getattr(self.cluster, "disruption_budgets", None)
        return read() if read is not None else []

    def defrag(self, max_moves: int | None = None) -> Defragged:
        """The fewest moves that give pending pods room (extender.views.defrag_plan)."""
        return defrag_of(self.ledger, self.planning, self.budgets(),
                         self.defrag_max_moves if max_moves is None else max_moves)

    def plan(self) -> Planned:
        """Where the pending shared-GPU pods can go: existing room or new pool nodes (extender.views.planning)."""
        return self.plans.fresh()

    # -- inspect ---------------------------------------------------------------
    def inspect(self, compact: bool = False) -> dict:
        """The inspect report; with ``compact``, the GPU map's form of it (extender.views.mapfeed)."""
        report = self.inspect_report(compact)
        report["nodes"] = list(report["nodes"])
        return report

    def inspect_report(self, compact: bool = False) -> dict:
        """:meth:`inspect` with ``nodes`` an iterator, for :func:`extender.verbs.wire.encode_report`."""
        report = self.ledger.inspect_report(annotations=not compact)
        report["ready"] = self.ready()
        if self.leadership is not None:
            report["leadership"] = self.leadership.status()
        report["cluster"] = getattr(self.cluster, "kind", "unknown")
        report["scoring"] = getattr(self.ledger.strategy, "name", "unknown")
        measured = self.stranded.current()
        if compact:  # the compact form reads each node's stranded share itself
            report["stranded"] = stranded_summary(measured)
            return mapfeed.compact(report, measured)
        annotate(report, measured)
        return report
