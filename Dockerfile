# syntax=docker/dockerfile:1

# Build the trainyard-manager binary.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace

# Download modules in their own layer, so that it is reused while go.mod and
# go.sum stay the same.
COPY go.mod go.sum ./
RUN go mod download

COPY apis/ apis/
COPY cmd/ cmd/
COPY pkg/ pkg/

# The build's identity (pkg/version). The build context has no .git, so the
# builder passes it, as the Makefile computes it:
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg GIT_COMMIT=$(git rev-parse HEAD) \
#     --build-arg BUILD_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) .
ARG VERSION=dev
ARG GIT_COMMIT=
ARG BUILD_DATE=
ARG LDFLAGS="-s -w -X github.com/trainyard/trainyard/pkg/version.Version=${VERSION} -X github.com/trainyard/trainyard/pkg/version.GitCommit=${GIT_COMMIT} -X github.com/trainyard/trainyard/pkg/version.BuildDate=${BUILD_DATE}"

# Static binaries; GOARCH follows the target platform of `docker buildx`. The
# image also carries the dataset/model initializer: a runtime's initializer
# container runs it with command [/trainyard-initializer, dataset] (or model).
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="${LDFLAGS}" -o /out/trainyard-manager ./cmd/trainyard-manager && \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="${LDFLAGS}" -o /out/trainyard-initializer ./cmd/trainyard-initializer

# The images run on distroless as the unprivileged "nonroot" user. `make images`
# builds the same two without docker (pkg/images, whose tests parse the stages
# below: keep them in step).

# The initializer alone: docker build --target initializer.
FROM gcr.io/distroless/static:nonroot AS initializer
ARG VERSION=dev
ARG GIT_COMMIT=
WORKDIR /
COPY --from=builder /out/trainyard-initializer /trainyard-initializer
USER 65532:65532
LABEL org.opencontainers.image.title="trainyard-initializer" \
      org.opencontainers.image.source="https://github.com/trainyard/trainyard" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}"
ENTRYPOINT ["/trainyard-initializer"]

# The manager, the default target. Its ports: health 8081, metrics 8443, the
# webhooks 9443 and the status server 10443 (manifests/base/manager/manager.yaml).
FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
ARG GIT_COMMIT=
WORKDIR /
COPY --from=builder /out/trainyard-manager /trainyard-manager
COPY --from=builder /out/trainyard-initializer /trainyard-initializer
USER 65532:65532
EXPOSE 8081 8443 9443 10443
LABEL org.opencontainers.image.title="trainyard-manager" \
      org.opencontainers.image.source="https://github.com/trainyard/trainyard" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}"
ENTRYPOINT ["/trainyard-manager"]
