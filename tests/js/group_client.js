// kafkajs at its defaults, apart from idempotence: produce COUNT values, then consume them in GROUP
// (which commits as it goes) and print what was consumed as JSON. Run by tests/broker/test_group_clients.py.
const { Kafka, logLevel } = require('kafkajs');

const [brokers, topic, group, first, count] = process.argv.slice(2);
const n = Number(count);
const start = Number(first);

async function main() {
  const kafka = new Kafka({ clientId: 'kafkajs-test', brokers: brokers.split(','), logLevel: logLevel.WARN });
  const producer = kafka.producer({ idempotent: true });
  await producer.connect();
  const messages = Array.from({ length: n }, (_, i) => ({ value: `js-${start + i}` }));
  await producer.send({ topic, acks: -1, messages });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    consumer
      .run({
        eachMessage: async ({ message }) => {
          got.push(message.value.toString());
          if (got.length >= n) resolve();
        },
      })
      .catch(reject);
  });
  await consumer.disconnect(); // commits what was consumed
  console.log(JSON.stringify({ consumed: got }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
