# syntax=docker/dockerfile:1
# Redpoint production image: compiled dist/, production dependencies only, non-root.
#   docker build -t redpoint .
#   docker run -p 8080:8080 -e REDPOINT_API_KEY=... -e REDPOINT_JWT_SECRET=... -e REDIS_URL=redis://... redpoint
# Without both secrets the server runs in dev mode and binds 127.0.0.1 inside the container,
# where a published port cannot reach it.

# ---- build: compile TypeScript to dist/ -------------------------------------------------------
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Install scripts are not needed: every native dependency ships prebuilt binaries.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY protocol ./protocol
COPY server ./server
# `npm run build` also copies the Redis engine's Lua scripts next to the compiled module.
RUN npm run build

# ---- runtime ------------------------------------------------------------------------------------
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production HOST=0.0.0.0
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies only. uWebSockets.js ships binaries for every platform and Node ABI
# (~90 MB); keep only the one this image loads (server/gateway/uws.ts picks it by name).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force \
 && keep="uws_$(node -p 'process.platform + "_" + process.arch + "_" + process.versions.modules').node" \
 && test -f "node_modules/uWebSockets.js/binaries/$keep" \
 && find node_modules/uWebSockets.js/binaries -name 'uws_*.node' ! -name "$keep" -delete
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080
# No curl in the slim image: probe with node's fetch (on OPS_PORT when the operations endpoints have their own port).
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.OPS_PORT || process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node itself is PID 1 (no npm or shell in between), so `docker stop`'s SIGTERM reaches the server.
CMD ["node", "--no-memory-reducer", "dist/server/main.js"]
