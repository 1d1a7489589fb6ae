"""No variant can lock the cluster's scheduling (docs/deploy-variants.md).

kube-scheduler calls the extender with ``ignorable: false``: while the extender is down, every pod
the extender is *interested in* (it asks for a managed resource, or there are no managedResources)
waits. If one of the pods the variant needs to run the extender were such a pod of such a
scheduler, an extender that is down (a rollout, a drain, a node failure, an OOM kill) could never
be placed again: no pod of that scheduler would be scheduled until someone edited the control
plane. This checks, on the rendered objects of every overlay and combination, that no workload
is scheduled by a scheduler configured (by the variant) to send it through a non-ignorable
extender — and that the check finds the locks it is there to find.
"""

import copy

import pytest

from rendered import (CONTROL_PLANE_CONFIG, OVERLAYS, every_rendering, pod_spec, read_yaml, render, scheduler_configs,
                      workloads)

RENDERINGS = every_rendering()


def schedulers(objects: list, control_plane: dict | None) -> dict:
    """scheduler name → its KubeSchedulerConfiguration, for the schedulers the variant configures:
    the cluster's own (default-scheduler, from the file the variant's docs give it) and those of
    the configurations the variant ships in ConfigMaps."""
    configs = [control_plane] if control_plane else []
    configs += [config for _, config in scheduler_configs(objects)]
    named = {}
    for config in configs:
        for profile in config.get("profiles") or [{"schedulerName": "default-scheduler"}]:
            named[profile.get("schedulerName", "default-scheduler")] = config
    return named


def requested(spec: dict) -> set:
    """Resource names the pod's containers (init containers included) request or limit."""
    names = set()
    for container in (spec.get("initContainers") or []) + spec["containers"]:
        resources = container.get("resources") or {}
        names |= set(resources.get("limits") or {}) | set(resources.get("requests") or {})
    return names


def locks(objects: list, control_plane: dict | None) -> list:
    """Workloads of the variant that a scheduler of the variant can place only through a
    non-ignorable extender (as kube-scheduler decides whether an extender is interested in a pod)."""
    named = schedulers(objects, control_plane)
    found = []
    for workload in workloads(objects):
        spec = pod_spec(workload)
        scheduler = spec.get("schedulerName") or "default-scheduler"
        config = named.get(scheduler)
        if config is None:  # a scheduler the variant leaves as it is: no extender of ours
            continue
        for extender in config.get("extenders") or []:
            managed = {r["name"] for r in extender.get("managedResources") or []}
            interested = not managed or bool(managed & requested(spec))
            if interested and not extender.get("ignorable", False):
                found.append(f"{workload['kind']}/{workload['metadata']['name']} is scheduled by {scheduler}, "
                             f"which sends it through the non-ignorable extender {extender['urlPrefix']}")
    return found


def control_plane_of(name: str) -> dict | None:
    """The cluster scheduler's configuration of a rendering (combinations: of their first part)."""
    path = CONTROL_PLANE_CONFIG[name.split("+")[0]]
    return read_yaml(path) if path else None


@pytest.mark.parametrize("name,objects", RENDERINGS, ids=[n for n, _ in RENDERINGS])
def test_no_variant_needs_its_own_extender_to_schedule_its_own_pods(name, objects):
    assert workloads(objects)
    assert locks(objects, control_plane_of(name)) == []


def test_every_scheduler_that_sends_all_pods_through_the_extender_is_a_second_one():
    """A configuration without managedResources is never the cluster's own scheduler's."""
    for overlay in OVERLAYS:
        if CONTROL_PLANE_CONFIG[overlay]:
            for extender in read_yaml(CONTROL_PLANE_CONFIG[overlay])["extenders"]:
                assert extender["managedResources"], overlay
        for _, config in scheduler_configs(render(overlay)):
            assert [p["schedulerName"] for p in config["profiles"]] == ["cgpu-scheduler"]


def test_the_check_finds_the_old_fragmentation_deployment():
    """The shape issue 33 found: the extender as a Deployment that the cluster's own scheduler
    places, with that scheduler sending every pod through the extender."""
    every_pod = read_yaml("manifests/overlays/fragmentation/scheduler-config.yaml")
    every_pod = {k: v for k, v in every_pod.items() if k not in ("profiles", "leaderElection")}
    (found,) = locks(render("default"), every_pod)
    assert "Deployment/cgpu-extender is scheduled by default-scheduler" in found


def test_the_check_finds_a_second_scheduler_that_places_itself():
    objects = render("fragmentation")
    (deployment,) = workloads(objects)
    pod_spec(deployment)["schedulerName"] = "cgpu-scheduler"
    assert len(locks(objects, None)) == 1


def test_the_check_finds_an_extender_pod_that_asks_for_a_managed_resource():
    objects = copy.deepcopy(render("default"))
    (deployment,) = workloads(objects)
    pod_spec(deployment)["containers"][0]["resources"]["limits"]["aliyun.com/gpu-mem"] = "1"
    assert len(locks(objects, control_plane_of("default"))) == 1
    config = control_plane_of("default")
    config["extenders"][0]["ignorable"] = True  # an ignorable extender is skipped while it is down
    assert locks(objects, config) == []
