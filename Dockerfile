# syntax=docker/dockerfile:1
# Redpoint production image: compiled dist/, production dependencies only, non-root.
#   docker build -t redpoint .
#   docker run -p 8080:8080 -e REDPOINT_API_KEY=... -e REDPOINT_JWT_SECRET=... -e REDIS_URL=redis://... redpoint
# Without both secrets the server runs in dev mode and binds 127.0.0.1 inside the container,
# where a published port cannot reach it.

# Node 24 (LTS) on Debian 13 "trixie" (glibc 2.41): the maintained uWebSockets.js build, the one
# with Node 22/24 binaries, needs glibc >= 2.38, which Debian 12 (2.36) does not have.

# ---- build: compile TypeScript to dist/ -------------------------------------------------------
FROM node:24-trixie-slim AS build
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
FROM node:24-trixie-slim AS runtime
ENV NODE_ENV=production HOST=0.0.0.0
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies only (the maintained uWebSockets.js build is an optional one: kept).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
COPY --from=build /app/dist ./dist
# Both uWebSockets.js builds ship a binary for every platform and Node ABI (~90 MB each): keep only
# the one this image loads, as server/gateway/uws.ts picks it. The build fails here when none loads.
RUN keep="$(node -e "import('./dist/server/gateway/uws.js').then((m) => console.log(m.loadedUws.path))")" \
 && test -f "$keep" \
 && echo "uWebSockets.js binary: $keep" \
 && find node_modules/uWebSockets.js node_modules/@btc-vision/uwebsockets.js -name 'uws_*.node' ! -path "$keep" -delete
USER node
EXPOSE 8080
# No curl in the slim image: probe with node's fetch (on OPS_PORT when the operations endpoints have their own port).
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.OPS_PORT || process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node itself is PID 1 (no npm or shell in between), so `docker stop`'s SIGTERM reaches the server.
CMD ["node", "--no-memory-reducer", "dist/server/main.js"]
