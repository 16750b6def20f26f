# syntax=docker/dockerfile:1.7
# One image recipe for every deployable, built from the repository root (the npm workspace), e.g.
#   docker build --build-arg SERVICE=services/sessions --build-arg PORT=8101 -t cgs/sessions:<tag> .
# SERVICE is the workspace folder (gateway, services/sessions, services/billing, services/accounts,
# services/auth-proxy); PORT only documents the listening port (EXPOSE).
ARG NODE_IMAGE=node:24-bookworm-slim

# Workspace manifests only, so dependency layers stay cached until a package.json or the lockfile changes.
# Every workspace's package.json is copied because npm ci checks the whole lockfile.
FROM ${NODE_IMAGE} AS manifests
WORKDIR /app
COPY package.json package-lock.json ./
COPY shared/package.json shared/
COPY host-agent/package.json host-agent/
COPY gateway/package.json gateway/
COPY services/sessions/package.json services/sessions/
COPY services/billing/package.json services/billing/
COPY services/accounts/package.json services/accounts/
COPY services/auth-proxy/package.json services/auth-proxy/
COPY infra/package.json infra/
COPY test/package.json test/
COPY clients/sdk/package.json clients/sdk/
COPY clients/cli/package.json clients/cli/

FROM manifests AS build
ARG SERVICE
RUN test -n "$SERVICE" || { echo "--build-arg SERVICE=<workspace folder> is required" >&2; exit 1; }
# The root's dev dependencies carry the compiler and type packages.
RUN npm ci --workspace shared --workspace host-agent --workspace "$SERVICE" --include-workspace-root --ignore-scripts --no-audit --no-fund
COPY tsconfig.base.json ./
COPY shared/ shared/
# The host agent's report format: sessions checks reports with it and its simulator runs it (every image carries
# it, a few kilobytes, so the recipe stays one).
COPY host-agent/ host-agent/
COPY ${SERVICE}/ ${SERVICE}/
# A service without a database has no migrations folder; an empty one keeps the runtime stage uniform. The gateway
# also serves the API reference (/docs/api), rendered from shared/openapi.json by Redocly (a root dev dependency)
# into its dist/.
RUN npx tsc -b host-agent "$SERVICE" && mkdir -p "$SERVICE/drizzle" \
 && if [ "$SERVICE" = gateway ]; then node gateway/scripts/build-api-reference.mjs; fi

FROM manifests AS runtime
ARG SERVICE
ARG PORT=8080
# HOST: listen on every interface inside the container (the processes default to loopback).
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    NODE_EXTRA_CA_CERTS=/etc/ssl/certs/rds-global-bundle.pem
RUN npm ci --omit=dev --workspace shared --workspace host-agent --workspace "$SERVICE" --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
# Amazon RDS CA bundle, so DATABASE_URL can use sslmode=verify-full.
ADD --chmod=644 https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem /etc/ssl/certs/rds-global-bundle.pem
COPY --from=build /app/shared/dist shared/dist
COPY shared/openapi.json shared/
COPY --from=build /app/host-agent/dist host-agent/dist
COPY --from=build /app/${SERVICE}/dist ${SERVICE}/dist
# drizzle-kit migrations, applied at start-up (main.ts reads ../drizzle from dist/).
COPY --from=build /app/${SERVICE}/drizzle ${SERVICE}/drizzle
USER node
WORKDIR /app/${SERVICE}
EXPOSE ${PORT}
CMD ["node", "--import", "@cgs/shared/dist/telemetry.js", "dist/main.js"]
