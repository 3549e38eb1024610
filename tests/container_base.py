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


SERVE_RECIPE = "nd-h100-v5"


@pytest.fixture(scope="session")
def serve_image(client, base_image) -> str:
    """FROM scratch + host Python, + the stand-in as /usr/local/bin/trtllm-serve, + the recipe's own Dockerfile
    (its entrypoint runs `exec -- trtllm-serve ...`): the command line a GPU VM runs (test_servers, test_enroot)."""
    import hashlib

    from repro.core.recipes import get_recipe
    from repro.engine.container import ImageSpec, build_image, image_spec_for
    from repro.rehearse.rehearsal import STANDIN

    digest = hashlib.sha256(STANDIN.read_bytes() + base_image.encode()).hexdigest()[:12]
    standin = build_image(
        ImageSpec(
            STANDIN.with_name("Dockerfile"),
            f"repro-standin:{digest}",
            {"BASE_IMAGE": base_image},
            with_repro_source=False,
        ),
        client=client,
    ).tag
    return build_image(image_spec_for(get_recipe(SERVE_RECIPE), base_image=standin, install="none"), client=client).tag
