"""The Flask application factory: ``create_app(config)``, no global app.

Routes under ``config.prefix`` (default ``/cgpu-scheduler``):

    POST filter, prioritize,           the kube-scheduler extender verbs, JSON only (else 415),
         preempt, bind                 answered by extender.serving.http_verbs (the served path skips Flask)
    GET  inspect                       every node and GPU, used/total, pods; ?compact=1: the GPU map's
                                       form, without the pods' annotations (extender.views.mapfeed)
    GET  plan                          pending shared-GPU pods: room now, new pool nodes, unplaceable
    GET  defrag[?maxMoves=N]           the fewest moves that give pending pods room (extender.views.defrag_plan)
    GET  metrics                       Prometheus metrics (extender.views.metrics)
    GET  ui                            the GPU map: one HTML page that refreshes from inspect?compact=1
                                       and plan
    GET  healthz                       the process answers
    GET  readyz                        200 once the cluster view is synced (and, with leader election,
                                       while this replica leads), else 503

Replies are JSON. ``inspect``, ``plan``, ``defrag`` and ``metrics`` walk every node: each is
rendered at most once per ``config.render_ttl`` seconds however many ask at once
while the cluster is unchanged (:class:`extender.serving.rendercache.RenderCache`). A
handler fault is logged with its traceback and answered with status 500 and a
one-line ``Error``; nothing else is non-200 but ``readyz``, ``plan`` and
``defrag`` before the first sync (503), a ``maxMoves`` that is not a whole
number from 0 to 100 (400), and, with leader election, ``readyz`` and the four
verbs on a replica that is not the leader (503, the verbs with an ``Error``
that says why and who leads).
"""

from __future__ import annotations

import time
from importlib import resources

from flask import Blueprint, Flask, Response, g, request
from werkzeug.exceptions import HTTPException

from extender.cluster.factory import make_cluster
from extender.ledger.ledger import Ledger
from extender.logs import fields, get_logger
from extender.serving.config import Config
from extender.serving.http_verbs import JSON, VERBS, Verbs, timing
from extender.serving.rendercache import RenderCache
from extender.verbs import wire
from extender.verbs.service import NOT_SYNCED, Extender
from extender.views.defrag_plan import defrag_json
from extender.views.metrics import VERBS as METRIC_VERBS
from extender.views.metrics import Metrics
from extender.views.planning import PlanSettings, plan_json
from extender.views.templates import load as load_templates
from policy.echo import shown
from policy.scoring import make_strategy
from policy.state import ClusterState

GPU_MAP = resources.files("extender.views").joinpath("static", "gpumap.html")
MAX_MOVES_ASKED = 100  # GET defrag?maxMoves=N: beyond this the exact search would not be asked for anyway


FLAGS = {"1": True, "true": True, "0": False, "false": False}


def _json(value, status: int = 200) -> Response:
    return Response(wire.encode(value), status=status, mimetype=JSON)


_OTHER_ENDPOINTS = {f"cgpu.{name}{suffix}": name for name in METRIC_VERBS if name not in VERBS
                    for suffix in ("", "_")}  # endpoint → its duration histogram


def build_extender(config: Config, cluster=None, clock=time.time_ns) -> Extender:
    """The extender service for ``config``, its cluster started."""
    strategy = make_strategy(config.scoring, seed=config.seed)
    ledger = Ledger(ClusterState(), strategy, config.pool_labels)
    cluster = cluster if cluster is not None else make_cluster(config)
    extender = Extender(ledger, cluster, clock=clock, pod_cache_size=config.pod_cache_size,
                        score_all_pods=config.score_all_pods, planning=plan_settings(config))
    extender.defrag_max_moves = config.defrag_max_moves
    if config.leader_election is not None:
        if getattr(cluster, "kind", None) != "kubernetes":
            raise ValueError("leader election needs the Kubernetes backend")
        from extender.cluster.kube.election import start_election

        # before the watches start: a standby sends no events (the leader does)
        extender.leadership = start_election(config.leader_election, cluster)
    cluster.start(ledger)
    if config.scale_up_placeholders:
        start_placeholders(config, extender)
    if config.defrag_execute:
        start_defrag(config, extender)
    get_logger().info("extender started", extra=fields(
        cluster=getattr(cluster, "kind", "unknown"), source=getattr(cluster, "source", None),
        scoring=config.scoring, prefix=config.normalised_prefix(), nodes=len(ledger.state.specs),
        allocations=len(ledger.allocations()), unaccounted=len(ledger.unaccounted()), ready=cluster.ready()))
    return extender


def plan_settings(config: Config) -> PlanSettings:
    """The autoscaling plan's settings from ``config`` (its templates file read now)."""
    templates = load_templates(config.templates_file, config.pool_labels) if config.templates_file else {}
    return PlanSettings(pool_labels=tuple(config.pool_labels), scheduler_names=tuple(config.scheduler_names),
                        placeholder_namespace=config.placeholder_namespace, templates=templates)


def start_placeholders(config: Config, extender: Extender) -> None:
    """Keep scale-up placeholder pods for the plan's new nodes (Kubernetes backend only)."""
    from extender.cluster.kube.placeholders import Placeholders, PlaceholderSettings

    cluster = extender.cluster
    if getattr(cluster, "kind", None) != "kubernetes":
        get_logger().warning("--scale-up-placeholders needs the Kubernetes backend; no placeholders are kept",
                             extra=fields(cluster=getattr(cluster, "kind", "unknown")))
        return
    settings = PlaceholderSettings(
        namespace=config.placeholder_namespace, priority_class=config.placeholder_priority_class,
        image=config.placeholder_image, scheduler_name=config.scheduler_names[0],
        interval=config.placeholder_interval, per_pool=config.placeholders_per_pool)
    extender.placeholders = Placeholders(cluster, extender, settings)
    cluster.on_stop(extender.placeholders.stop)
    extender.placeholders.start()


def start_defrag(config: Config, extender: Extender) -> None:
    """Make the defragmentation plan's moves (opt-in; Kubernetes backend only: it evicts)."""
    from extender.defrag.executor import DefragSettings, Executor

    cluster = extender.cluster
    if getattr(cluster, "kind", None) != "kubernetes":
        get_logger().warning("--defrag-execute needs the Kubernetes backend; nothing is moved",
                             extra=fields(cluster=getattr(cluster, "kind", "unknown")))
        return
    settings = DefragSettings(max_moves=config.defrag_max_moves, moves_per_hour=config.defrag_moves_per_hour,
                              interval=config.defrag_interval, hold_seconds=config.defrag_hold_seconds)
    extender.defragger = Executor(cluster, extender, settings)
    cluster.on_stop(extender.defragger.stop)
    extender.defragger.start()


def create_app(config: Config | None = None, *, cluster=None, extender: Extender | None = None) -> Flask:
    """A new application. Tests may pass a ``cluster`` backend or a ready ``extender``."""
    config = config or Config()
    extender = extender or build_extender(config, cluster)
    app = Flask("cgpu_extender")
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes
    app.extensions["cgpu"] = extender
    metrics = app.extensions["cgpu_metrics"] = Metrics(extender)
    verbs = app.extensions["cgpu_verbs"] = Verbs(extender, metrics, config.normalised_prefix())
    gpu_map = GPU_MAP.read_bytes()
    rendered = app.extensions["cgpu_renders"] = RenderCache(config.render_ttl)
    log = get_logger()
    routes = Blueprint("cgpu", __name__, url_prefix=config.normalised_prefix() or None)

    def verb_route(verb: str):
        def route():
            status, headers, body = verbs.reply(verb, request.path, request.content_type, request.get_data(),
                                                started=g.started)
            return Response(body, status=status, headers=headers)
        route.__name__ = verb
        routes.add_url_rule(f"/{verb}", endpoint=verb, view_func=route, methods=["POST"])

    for verb in VERBS:
        verb_route(verb)

    @routes.get("/inspect")
    def inspect():
        compact = request.args.get("compact", "0")
        if compact not in FLAGS:
            return _json({"Error": f"compact must be 1 or 0, not {shown(compact, 40)}"}, 400)
        return Response(rendered.get(("inspect", FLAGS[compact]),
                                     lambda: wire.encode_report(extender.inspect_report(compact=FLAGS[compact])),
                                     extender.generation()), mimetype=JSON)

    @routes.get("/plan")
    def plan():
        if not extender.ready():
            return _json({"Error": NOT_SYNCED}, 503)
        return Response(rendered.get("plan", lambda: wire.encode(plan_json(extender.plan())), extender.generation()),
                        mimetype=JSON)

    @routes.get("/defrag")
    def defrag():
        asked = request.args.get("maxMoves")
        if asked is not None and not (asked.isdigit() and int(asked) <= MAX_MOVES_ASKED):
            return _json({"Error": f"maxMoves must be a whole number from 0 to {MAX_MOVES_ASKED}, "
                                   f"got {shown(asked)}"}, 400)
        if not extender.ready():
            return _json({"Error": NOT_SYNCED}, 503)
        moves = int(asked) if asked is not None else None
        return Response(rendered.get(("defrag", moves), lambda: wire.encode(defrag_json(extender.defrag(moves))),
                                     extender.generation()), mimetype=JSON)

    @routes.get("/metrics")
    def metrics_():
        content_type = metrics.content_type(request.headers.get("Accept"))
        body = rendered.get(("metrics", content_type), lambda: metrics.render(request.headers.get("Accept"))[0])
        return Response(body, mimetype=None, content_type=content_type)

    @routes.get("/ui")
    def ui():
        return Response(gpu_map, mimetype="text/html")

    @routes.get("/healthz")
    def healthz():
        return _json({"status": "ok"})

    @routes.get("/readyz")
    def readyz():
        ready = extender.serving()
        reply = {"ready": ready}
        if extender.leadership is not None:
            status = extender.leadership.status()
            reply.update(role=status["role"], leader=status["leader"])
        return _json(reply, 200 if ready else 503)

    app.register_blueprint(routes)

    @app.before_request
    def start_timer():
        g.started = time.perf_counter()

    @app.after_request
    def server_timing(response: Response) -> Response:
        """``Server-Timing: app;dur=<ms>``: the handler's own time, body read to reply; and its histogram."""
        started = g.get("started")
        if started is not None and "Server-Timing" not in response.headers:
            seconds = time.perf_counter() - started
            response.headers["Server-Timing"] = timing(seconds)
            verb = _OTHER_ENDPOINTS.get(request.endpoint)
            if verb is not None:
                metrics.observe(verb, seconds)
        return response

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        return _json({"Error": f"{exc.code} {exc.name}: {exc.description}"}, exc.code or 500)

    @app.errorhandler(Exception)
    def internal_error(exc: Exception):
        log.error("internal error", exc_info=exc, extra=fields(path=request.path))
        return _json({"Error": f"internal error in the GPU-share extender: {type(exc).__name__}"}, 500)

    return app
