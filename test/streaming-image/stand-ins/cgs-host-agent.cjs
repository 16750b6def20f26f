// STAND-IN for the host agent bundle (host-agent/dist/bundle/cgs-host-agent.cjs, being built in its own workspace):
// it checks what the image promises the agent (Sunshine's certificate at SUNSHINE_CERT_FILE when it starts, the X
// display at DISPLAY with XAUTHORITY) and reports the certificate's SHA-256 fingerprint the way the agent will.
const crypto = require("node:crypto");
const fs = require("node:fs");
const net = require("node:net");

const certFile = process.env.SUNSHINE_CERT_FILE;
const fingerprint = new crypto.X509Certificate(fs.readFileSync(certFile)).fingerprint256;
const socket = `/tmp/.X11-unix/X${(process.env.DISPLAY ?? ":0").slice(1)}`;
const x = net.connect(socket);
x.on("connect", () => {
  x.destroy();
  fs.writeFileSync(
    process.env.CGS_STANDIN_AGENT_REPORT,
    JSON.stringify({
      fingerprint,
      display: process.env.DISPLAY,
      xauthority: fs.existsSync(process.env.XAUTHORITY),
    }),
  );
  fs.appendFileSync(process.env.EVENTS, `agent started ${fingerprint}\n`);
});
x.on("error", (err) => fs.appendFileSync(process.env.EVENTS, `agent no display: ${err.message}\n`));
setInterval(() => undefined, 60_000);
process.on("SIGTERM", () => process.exit(0));
