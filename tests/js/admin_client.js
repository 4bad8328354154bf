// kafkajs's admin at its defaults: create a topic (waiting for its leaders) and list the topics, as
// JSON. Run by tests/broker/test_admin_clients.py.
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const admin = new Kafka({ brokers: process.argv[2].split(','), logLevel: logLevel.WARN }).admin();
  await admin.connect();
  const created = await admin.createTopics({
    topics: [{ topic: 'js-admin', numPartitions: 3, replicationFactor: 2 }],
    waitForLeaders: true,
  });
  const topics = await admin.listTopics();
  await admin.disconnect();
  console.log(JSON.stringify({ created, topics }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
