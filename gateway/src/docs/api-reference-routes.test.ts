import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { startTestGateway, type TestGateway } from "../../../test/harnesses/gateway-harness";
import { loadApiReference } from "./api-reference-routes";

let idp: TestIdentityProvider;
let gw: TestGateway;

beforeAll(async () => {
  idp = await startTestIdentityProvider();
  gw = await startTestGateway(idp);
});
afterAll(async () => {
  await gw.close();
  await idp.close();
});

const directives = (policy: string | null) =>
  new Map(
    (policy ?? "")
      .split(";")
      .map((d) => d.trim().split(/\s+/) as [string, ...string[]])
      .map(([k, ...v]) => [k, v]),
  );

describe("the API reference at /docs/api", () => {
  it("when it is built, then its page holds no inline script and its script carries the contract", () => {
    // npm run build writes it (gateway/scripts/build-api-reference.mjs); CI and npm test build first.
    const reference = loadApiReference();
    expect(reference).toBeDefined();
    expect(/<script(?![^>]*\ssrc=)[^>]*>/.test(reference!.html)).toBe(false);
    expect(reference!.scripts.get("redoc.js")?.includes('"/api/v1/sessions/start"')).toBe(true);
  });

  it("when a browser asks for it, then it answers 200 HTML under the pages' CSP, widened only for its own styles and fonts", async () => {
    const res = await fetch(`${gw.url}/docs/api`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const body = await res.text();
    expect(body.includes("<title>Cloud-gaming platform API reference</title>")).toBe(true);
    expect(body.includes('<script type="module" src="/docs/api/redoc.js"></script>')).toBe(true);

    const page = directives(res.headers.get("content-security-policy"));
    const login = directives((await fetch(`${gw.url}/login`)).headers.get("content-security-policy"));
    expect(page.get("script-src")).toEqual(["'self'"]);
    expect(page.get("default-src")).toEqual(["'self'"]);
    expect(page.get("connect-src")).toEqual(["'self'"]);
    expect(page.get("style-src")?.slice(0, 2)).toEqual(["'self'", "'unsafe-hashes'"]);
    expect(
      page
        .get("style-src")
        ?.slice(2)
        .every((s) => /^'sha256-[A-Za-z0-9+/]+=*'$/.test(s)),
    ).toBe(true);
    expect(page.get("style-src")?.join(" ")).not.toContain("unsafe-inline");
    expect(page.get("font-src")).toEqual(["'self'", "data:"]);
    // Every other directive is the pages' own, and the other pages keep theirs.
    for (const [name, value] of login) {
      if (name !== "style-src" && name !== "font-src") expect([name, page.get(name)]).toEqual([name, value]);
    }
    expect(login.get("style-src")).toEqual(["'self'"]);
  });

  it("when its script is asked for, then it comes as JavaScript from the same origin, and unknown files are 404", async () => {
    const script = await fetch(`${gw.url}/docs/api/redoc.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect((await fetch(`${gw.url}/docs/api/nothing.js`)).status).toBe(404);
  });
});
