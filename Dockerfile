# planmux in a container: a small image whose default command serves the built-in demo
# config over stdio (a host runs it with `docker run -i --rm planmux`).
#
#   docker build -t planmux .
#   docker run -i --rm planmux                      # the built-in demo servers
#   docker run -i --rm -v "$PWD/servers.toml:/config/servers.toml:ro" planmux serve --config /config/servers.toml
#
# Servers started with npx or uvx need node or python in the image: build with
#   docker build --build-arg WITH_NODE=1 --build-arg WITH_PYTHON=1 -t planmux-full .

FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin planmux && strip target/release/planmux

FROM debian:bookworm-slim
ARG WITH_NODE=0
ARG WITH_PYTHON=0
RUN set -eux; \
    packages="ca-certificates"; \
    if [ "$WITH_NODE" = 1 ]; then packages="$packages nodejs npm"; fi; \
    if [ "$WITH_PYTHON" = 1 ]; then packages="$packages python3 python3-pip pipx"; fi; \
    apt-get update; apt-get install -y --no-install-recommends $packages; \
    if [ "$WITH_PYTHON" = 1 ]; then PIPX_BIN_DIR=/usr/local/bin pipx install uv; fi; \
    rm -rf /var/lib/apt/lists/*; \
    useradd --create-home --uid 10001 planmux
COPY --from=build /src/target/release/planmux /usr/local/bin/planmux
USER planmux
WORKDIR /home/planmux
ENTRYPOINT ["planmux"]
CMD ["serve"]
