# Build the manager binary (it also serves `manager node-agent` for RegistryMirror nodes).
FROM docker.io/library/golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download

COPY main.go main.go
COPY api/ api/
COPY controllers/ controllers/
COPY internal/ internal/

RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w" -o manager .

# distroless: no shell, no package manager; runs as UID 65532. The licence under /licenses,
# where OpenShift's certification (preflight HasLicense) and scanners look for it.
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY LICENSE /licenses/LICENSE
COPY --from=builder /workspace/manager .
USER 65532:65532

ENTRYPOINT ["/manager"]
