"""Container tooling: a Docker engine on this machine, local images for machines without a registry,
and ``make compose-test``, which runs docker-compose.yml on that engine and breaks it.

The configuration that compose mounts (``deploy/prometheus``, ``deploy/grafana``) lives beside this
package; the Dockerfiles of the local stand-in images are in ``deploy/docker``.
"""
