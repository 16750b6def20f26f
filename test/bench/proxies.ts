import { spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { GATEWAY_NODE, spawnNode } from "./production-gateway";

/**
 * The two proxies the benchmarks measure the gateway against: nginx (Debian's, a plain proxy_pass with keepalive),
 * the baseline of the targets; and a bare Node proxy (node:http forwarding through the gateway's own
 * undici keep-alive pool, no check at all, on the gateway's runtime), the ceiling of any Node proxy built like the
 * gateway.
 */
const root = path.resolve(__dirname, "..", "..");
// The gateway's own undici, for the bare proxy (the repository root may hold another version).
const UNDICI = require.resolve("undici", { paths: [path.join(root, "gateway")] });

/** Starts nginx (daemonised, one worker) in `dir`, on 127.0.0.1:`port`, proxying to 127.0.0.1:`upstreamPort`. */
export function startNginx(dir: string, port: number, upstreamPort: number): void {
  const conf = `
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream app { server 127.0.0.1:${upstreamPort}; keepalive 128; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}`;
  writeFileSync(path.join(dir, "nginx.conf"), conf);
  const started = spawnSync("nginx", ["-c", path.join(dir, "nginx.conf"), "-p", dir], { encoding: "utf8" });
  if (started.status !== 0) throw new Error(`nginx failed to start: ${started.stderr}`);
}

export function stopNginx(dir: string): void {
  spawnSync("nginx", ["-c", path.join(dir, "nginx.conf"), "-p", dir, "-s", "stop"]);
}

/** nginx's master and worker pids, for its CPU. */
export function nginxPids(dir: string): number[] {
  const master = Number(readFileSync(path.join(dir, "nginx.pid"), "utf8").trim());
  const children = spawnSync("pgrep", ["-P", String(master)], { encoding: "utf8" }).stdout;
  return [master, ...children.split(/\s+/).filter(Boolean).map(Number)];
}

/** Starts the bare Node proxy on 127.0.0.1:`port`, forwarding every request to `upstreamUrl`. */
export function startBareProxy(port: number, upstreamUrl: string): ChildProcess {
  const script =
    `const http=require("node:http");const {Agent}=require(${JSON.stringify(UNDICI)});` +
    `const pool=new Agent({connections:64});const origin=${JSON.stringify(upstreamUrl)};` +
    `http.createServer((req,res)=>{const headers={...req.headers};delete headers.connection;` +
    `pool.dispatch({origin,path:req.url,method:req.method,headers,body:null},{onRequestStart(){},` +
    `onResponseStart(c,status,h){res.writeHead(status,h)},onResponseData(c,chunk){res.write(chunk)},` +
    `onResponseEnd(){res.end()},onResponseError(){res.statusCode=502;res.end()}})})` +
    `.listen(${port},"127.0.0.1")`;
  return spawnNode(GATEWAY_NODE, ["-e", script], { cwd: root, env: process.env });
}
