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

# Run on distroless as the unprivileged "nonroot" user.
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /out/trainyard-manager /trainyard-manager
COPY --from=builder /out/trainyard-initializer /trainyard-initializer
USER 65532:65532
ENTRYPOINT ["/trainyard-manager"]
