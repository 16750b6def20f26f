import { serviceQueueName } from "../platform-values";
import { DEPLOYABLES } from "../service-catalog";
import { ACCOUNT_ID, readStackConfig, TEST_SECRETS, type StackRun } from "./stack-harness";

/** What `pulumi stack output` shows an operator after `pulumi up`, checked against the stack's own file. */
export function describeStackOutputs(stack: string, run: () => StackRun): void {
  const config = readStackConfig(stack);
  const env = config["cgs:environment"] as string;
  const region = config["aws:region"] as string;
  const domain = config["cgs:domain"] as string;
  const prefix = `cgs-${env}`;
  const registry = `${ACCOUNT_ID}.dkr.ecr.${region}.amazonaws.com`;
  const outputs = () => run().outputs;

  describe(`stack ${stack}: outputs`, () => {
    it("when the stack is up, then it exports exactly the outputs the README's deployment steps read", () => {
      expect(Object.keys(outputs()).sort()).toEqual(
        [
          "alarmTopicArn",
          "certificateArn",
          "clusterName",
          "databaseAddress",
          "deadLetterQueueUrls",
          "headscaleAclPolicy",
          "hostReportsQueueUrl",
          "imageRegistry",
          "ingressHostname",
          "kubeconfig",
          "privateNetworkLoginServer",
          "queueUrlsByService",
          "redisEndpoint",
          "repositoryUrls",
          "serviceRoleArns",
          "streamingAmiId",
          "streamingImagePipelineArn",
          "streamingLaunchTemplateId",
          "streamingRegions",
          "tailnetAclPolicy",
          "url",
          "vpcId",
        ].sort(),
      );
    });

    it("when the stack is up, then the public URL, cluster and registry carry the environment's names", () => {
      expect(outputs()).toMatchObject({
        url: `https://${domain}`,
        clusterName: prefix,
        imageRegistry: registry,
        databaseAddress: `${prefix}.abc.${region}.rds.amazonaws.com`,
        redisEndpoint: `master.${prefix}.cache.amazonaws.com`,
        alarmTopicArn: `arn:aws:sns:${region}:${ACCOUNT_ID}:${prefix}-alarms`,
        ingressHostname: expect.stringMatching(/\.elb\.amazonaws\.com$/),
      });
      expect(outputs().certificateArn).toMatch(
        new RegExp(`^arn:aws:acm:${region}:${ACCOUNT_ID}:certificate/`),
      );
      expect(outputs().streamingLaunchTemplateId).toEqual(expect.any(String));
      expect(outputs().hostReportsQueueUrl).toBe(
        `https://sqs.${region}.amazonaws.com/${ACCOUNT_ID}/${env}-cgs-host-reports`,
      );
    });

    it("when images are pushed, then every deployable has its repository under the environment's prefix", () => {
      expect(outputs().repositoryUrls).toEqual(
        Object.fromEntries(DEPLOYABLES.map((d) => [d.name, `${registry}/${prefix}/${d.name}`])),
      );
    });

    it("when a consumer is inspected, then each queue and its dead-letter queue are named for the environment", () => {
      const consumers = DEPLOYABLES.filter((d) => d.consumesQueue).map((d) => d.name);
      const url = (name: string) =>
        `https://sqs.${region}.amazonaws.com/${ACCOUNT_ID}/${env}-${serviceQueueName(name)}`;
      expect(outputs().queueUrlsByService).toEqual(Object.fromEntries(consumers.map((n) => [n, url(n)])));
      expect(outputs().deadLetterQueueUrls).toEqual(
        Object.fromEntries(consumers.map((n) => [n, `${url(n)}-dlq`])),
      );
    });

    it("when a service's permissions are audited, then each deployable has its own role", () => {
      expect(outputs().serviceRoleArns).toEqual(
        Object.fromEntries(
          DEPLOYABLES.map((d) => [d.name, `arn:aws:iam::${ACCOUNT_ID}:role/${prefix}-${d.name}`]),
        ),
      );
    });

    it("when the kubeconfig is exported, then it is a secret that signs in through aws eks get-token for this cluster and region", () => {
      expect(run().secretOutputs).toEqual(["kubeconfig"]);
      const kubeconfig = JSON.parse(outputs().kubeconfig as string) as {
        "current-context": string;
        users: { user: { exec: { command: string; args: string[] } } }[];
      };
      expect(kubeconfig["current-context"]).toBe(prefix);
      expect(kubeconfig.users[0]?.user.exec).toMatchObject({
        command: "aws",
        args: ["eks", "get-token", "--cluster-name", prefix, "--region", region],
      });
    });

    it("when the outputs are printed, then no secret from the stack's config appears in them", () => {
      const printed = JSON.stringify(outputs());
      for (const value of [...Object.values(TEST_SECRETS), "generated-password"])
        expect(printed).not.toContain(value);
    });

    it("when the private network's policy is applied, then it opens exactly the stack's streaming ports, never the host API or assignment port", () => {
      const hosted = (config["cgs:privateNetwork"] as { kind: string }).kind === "tailscale";
      const raw = hosted ? outputs().tailnetAclPolicy : outputs().headscaleAclPolicy;
      expect(typeof raw).toBe("string");
      const streaming = config["cgs:streaming"] as {
        tcpPorts: number[];
        udpPortRange: { from: number; to: number };
      };
      const text = raw as string;
      for (const port of streaming.tcpPorts) expect(text).toContain(String(port));
      const { apiPort, assignPort } = config["cgs:streaming"] as { apiPort: number; assignPort: number };
      expect(text).not.toContain(`:${apiPort}`);
      expect(text).not.toContain(`:${assignPort}`);
    });
  });
}
