"""A tiny local base image for the container tests: the host's Python, its libraries and /bin/sh, FROM scratch.

No registry is reachable in CI, so the tests cannot pull an image; this rootfs is ~20 MB and builds in
seconds even with the vfs storage driver.
"""

from __future__ import annotations

import pytest
from conftest import required

from repro.rehearse.baseimage import base_dockerfile_dir, rootfs_key, write_rootfs

__all__ = ["base_dockerfile_dir", "rootfs_key", "write_rootfs"]


@pytest.fixture(scope="session")
def client():
    """The local Docker engine; CI (REPRO_REQUIRE_DOCKER) fails without one, a developer's machine skips."""
    try:
        import docker

        c = docker.from_env(timeout=300)
        c.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means no usable engine
        if required("REPRO_REQUIRE_DOCKER"):
            pytest.fail(f"REPRO_REQUIRE_DOCKER=1 but no Docker engine answers: {exc}")
        pytest.skip(f"no Docker engine ({exc}); start one with .ci/start-dockerd.sh")
    return c


@pytest.fixture(scope="session")
def base_image(client, tmp_path_factory) -> str:
    """FROM scratch + the host's Python and /bin/sh, built through the same build_image as the recipe image."""
    from repro.engine.container import ImageSpec, build_image

    ctx = base_dockerfile_dir(tmp_path_factory.mktemp("testbase"))
    ref = build_image(
        ImageSpec(ctx / "Dockerfile", f"repro-testbase:{rootfs_key()}", {}, with_repro_source=False), client=client
    )
    return ref.tag
