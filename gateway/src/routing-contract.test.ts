import { listOperations, loadOpenApiDocument, type OpenApiDocument } from "@cgs/shared";
import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { upstreamsFromConfig } from "./app";
import { loadGatewayConfig } from "./config";
import { buildRouteTable, GATEWAY_LOCAL_PATHS, GATEWAY_OPERATIONS } from "./http/route-table";
import { startTestGateway, type TestGateway } from "../../test/harnesses/gateway-harness";

const doc = loadOpenApiDocument();
const upstreams = upstreamsFromConfig(loadGatewayConfig({}));

/** Minimal valid bodies for operations whose request body has required fields. */
const SAMPLE_BODIES: Record<string, unknown> = {
  createTopup: { amount: 2000 },
  updateAutoRecharge: { enabled: false },
  updateSpendLimits: { daily: 2000 },
  requestPasswordReset: { email: "someone@example.com" },
  completePasswordReset: { token: "reset-token", password: "a-long-enough-password" },
  receiveStripeWebhook: { id: "evt_1", type: "checkout.session.completed", data: { object: {} } },
};

/** Every documented path parameter is a UUID, which the gateway validates before forwarding. */
function concretePath(template: string): string {
  return template.replace(/\{[^}]+\}/g, "00000000-0000-4000-8000-000000000001");
}

describe("routing contract: openapi.json and the gateway's route table", () => {
  it("when the route table is built from openapi.json, then every documented operation has exactly one route with an upstream or a gateway handler", () => {
    const table = buildRouteTable(doc, upstreams);
    const documented = listOperations(doc).map((op) => `${op.method.toUpperCase()} ${op.path}`);
    const routed = table.routes.map((r) => `${r.method} ${r.path}`);
    expect(new Set(routed).size).toBe(routed.length);
    expect(routed.sort()).toEqual(documented.sort());
    for (const route of table.routes) {
      if (route.owner === "gateway") {
        expect(GATEWAY_OPERATIONS.has(route.operationId)).toBe(true);
        expect(route.upstream).toBeNull();
      } else {
        expect(route.upstream).toBe(upstreams[route.owner]);
      }
    }
  });

  it("when the gateway serves paths of its own, then none of them is under /api/v1 (so they cannot shadow the contract)", () => {
    for (const p of GATEWAY_LOCAL_PATHS) expect(p.startsWith("/api/")).toBe(false);
    expect(doc.paths["/openapi.json"]).toBeUndefined();
  });

  it("when an operation's owner has no upstream, then building the table fails", () => {
    const broken = structuredClone(doc) as OpenApiDocument;
    expect(() => buildRouteTable(broken, { ...upstreams, billing: "" })).toThrow(
      /no upstream URL for owner billing/,
    );
    const unknownGatewayOp = structuredClone(doc) as OpenApiDocument;
    unknownGatewayOp.paths["/api/v1/extra"] = {
      get: {
        operationId: "getExtra",
        responses: {},
        "x-owner": "gateway",
        "x-rate-limit": null,
        security: [],
      },
    };
    expect(() => buildRouteTable(unknownGatewayOp, upstreams)).toThrow(/no handler for getExtra/);
  });

  describe("over HTTP", () => {
    let idp: TestIdentityProvider;
    let gw: TestGateway;
    beforeAll(async () => {
      idp = await startTestIdentityProvider();
      gw = await startTestGateway(idp, { upstreamHandler: (_req, res) => res.writeHead(204).end() });
    });
    afterAll(async () => {
      await gw.close();
      await idp.close();
    });

    it("when each documented operation is called, then it is answered by its owner and no other", async () => {
      const token = await idp.sign({ sub: "contract" });
      for (const op of listOperations(doc)) {
        const counts = Object.fromEntries(
          Object.entries(gw.upstreams).map(([k, u]) => [k, u.requests.length]),
        );
        const withBody = ["post", "patch", "put"].includes(op.method);
        const res = await fetch(`${gw.url}${concretePath(op.path)}`, {
          method: op.method.toUpperCase(),
          headers: {
            authorization: `Bearer ${token}`,
            ...(withBody ? { "content-type": "application/json", "stripe-signature": "t=1,v1=x" } : {}),
          },
          body: withBody ? JSON.stringify(SAMPLE_BODIES[op.operationId] ?? {}) : undefined,
        });
        const label = `${op.method.toUpperCase()} ${op.path}`;
        const answered = res.status === 204 || res.status === 200 ? "answered" : await res.text();
        expect([label, answered]).toEqual([label, "answered"]);
        for (const [owner, upstream] of Object.entries(gw.upstreams)) {
          expect([label, owner, upstream.requests.length - counts[owner]!]).toEqual([
            label,
            owner,
            owner === op.owner ? 1 : 0,
          ]);
        }
      }
    });

    it("when an /api/v1 path is not documented, then the gateway forwards it nowhere", async () => {
      const token = await idp.sign({ sub: "contract" });
      const total = () => Object.values(gw.upstreams).reduce((n, u) => n + u.requests.length, 0);
      const before = total();
      for (const p of [
        "/api/v1/sessions",
        "/api/v1/sessions/poll/extra",
        "/api/v2/sessions/poll",
        "/api/v1/admin",
      ]) {
        const res = await fetch(`${gw.url}${p}`, { headers: { authorization: `Bearer ${token}` } });
        expect([p, res.status]).toEqual([p, 404]);
      }
      expect(total()).toBe(before);
    });
  });
});
