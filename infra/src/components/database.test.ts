import type { DatabaseConfig } from "../config";
import { mockResources, settled, stagingValue } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { Database } from "./database";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
function database(
  change: (c: DatabaseConfig) => void = () => {},
  databases: Record<string, string> = { billing: "billing" },
) {
  const config = stagingValue<DatabaseConfig>("database");
  change(config);
  return new Database(`database-${++built}`, {
    ...config,
    identifier: "cgs-test",
    vpcId: "vpc-1",
    subnetIds: ["subnet-a", "subnet-b"],
    clientSecurityGroupIds: ["sg-nodes"],
    databases,
    secretPrefix: "cgs-test",
    tags: {},
  });
}
const of = (type: string) =>
  resources.filter((r) => r.type === type && r.name.startsWith(`database-${built}`));

describe("Database", () => {
  it("when each service has a database, then each gets its own secret and the server forces TLS", async () => {
    database(() => {}, { sessions: "sessions", "auth-proxy": "auth_proxy" });
    await settled();
    expect(of("aws:secretsmanager/secret:Secret").map((s) => s.inputs.name)).toEqual([
      "cgs-test/sessions/database",
      "cgs-test/auth-proxy/database",
    ]);
    const [params] = of("aws:rds/parameterGroup:ParameterGroup");
    expect(params?.inputs).toMatchObject({
      family: "postgres16",
      parameters: expect.arrayContaining([{ name: "rds.force_ssl", value: "1" }]),
    });
    expect(of("aws:rds/instance:Instance")[0]?.inputs).toMatchObject({
      publiclyAccessible: false,
      storageEncrypted: true,
    });
  });

  it.each([
    [
      "a version that is not PostgreSQL's",
      (c: DatabaseConfig) => (c.engineVersion = "sixteen"),
      /cgs:database.engineVersion must be a PostgreSQL version such as "16" or "16.4" \(got "sixteen"\)/,
    ],
    [
      "a class without the db. prefix",
      (c: DatabaseConfig) => (c.instanceClass = "t4g.medium"),
      /cgs:database.instanceClass must be an RDS class such as db.t4g.medium/,
    ],
    [
      "less storage than gp3 allows",
      (c: DatabaseConfig) => (c.allocatedStorageGiB = 5),
      /cgs:database.allocatedStorageGiB must be an integer from 20 to 65536 \(got 5\)/,
    ],
    [
      "an autoscaling ceiling below the allocation",
      (c: DatabaseConfig) => (c.maxAllocatedStorageGiB = 10),
      /cgs:database.maxAllocatedStorageGiB must be an integer from 20 to 65536 \(got 10\)/,
    ],
    [
      "backups kept longer than RDS allows",
      (c: DatabaseConfig) => (c.backupRetentionDays = 40),
      /cgs:database.backupRetentionDays must be an integer from 0 to 35 \(got 40\)/,
    ],
    [
      "a quoted boolean",
      (c: DatabaseConfig) => ((c as unknown as { multiAz: string }).multiAz = "yes"),
      /cgs:database.multiAz must be true or false \(got "yes"\)/,
    ],
  ])("when the config has %s, then the database is refused", (_what, change, message) => {
    expect(() => database(change)).toThrow(message);
  });

  it.each([
    [
      "a hyphen, which the unquoted role in the URL cannot carry",
      "auth-proxy",
      /database of svc must be a lowercase PostgreSQL identifier \(got "auth-proxy"\)/,
    ],
    ["PostgreSQL's own", "postgres", /database of svc: postgres is reserved by PostgreSQL or RDS/],
    ["the master user's", "cgs_admin", /database of svc: cgs_admin is reserved/],
  ])("when a service's database name has %s, then it is refused", (_what, name, message) => {
    expect(() => database(() => {}, { svc: name })).toThrow(message);
  });
});
