import { mockResources, settled } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { PublicEndpoint } from "./public-endpoint";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
const endpoint = (domain = "play.staging.example.com", route53ZoneId = "Z0000000000000000STAGE") =>
  new PublicEndpoint(`endpoint-${++built}`, { domain, route53ZoneId, tags: {} });

describe("PublicEndpoint", () => {
  it("when built, then the certificate is validated by a record in the domain's own zone", async () => {
    const e = endpoint();
    await settled();
    const cert = resources.find(
      (r) => r.type === "aws:acm/certificate:Certificate" && r.name === `endpoint-${built}`,
    );
    expect(cert?.inputs).toMatchObject({ domainName: "play.staging.example.com", validationMethod: "DNS" });
    const record = resources.find(
      (r) => r.type === "aws:route53/record:Record" && r.name === `endpoint-${built}-validation`,
    );
    expect(record?.inputs).toMatchObject({
      zoneId: "Z0000000000000000STAGE",
      type: "CNAME",
      name: "_x.play.staging.example.com",
    });
    expect(await new Promise((resolve) => e.certificateArn.apply(resolve))).toMatch(
      /^arn:aws:acm:eu-west-1:/,
    );
  });

  it.each([
    [
      "a URL instead of a host name",
      ["https://play.example.com"],
      /cgs:domain must be a lowercase host name/,
    ],
    ["an uppercase host name", ["Play.Example.com"], /cgs:domain must be a lowercase host name/],
    [
      "a zone given by its domain",
      ["play.example.com", "example.com"],
      /cgs:route53ZoneId must be a Route 53 hosted zone id \(Z...\) \(got "example.com"\)/,
    ],
  ])("when given %s, then the endpoint is refused", (_what, args, message) => {
    expect(() => endpoint(...(args as [string, string?]))).toThrow(message);
  });
});
