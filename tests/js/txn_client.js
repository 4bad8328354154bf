// kafkajs at its defaults, apart from the transactional producer: commit COUNT values, abort COUNT more,
// commit COUNT more, then read the topic back in a group with kafkajs' default isolation (read_committed)
// and print the values as JSON. Run by tests/broker/test_transactions.py.
const { Kafka, logLevel } = require('kafkajs');

const [brokers, topic, count] = process.argv.slice(2);
const n = Number(count);

async function main() {
  const kafka = new Kafka({ clientId: 'kafkajs-txn', brokers: brokers.split(','), logLevel: logLevel.WARN });
  const producer = kafka.producer({ transactionalId: 'kafkajs-tx', maxInFlightRequests: 1, idempotent: true });
  await producer.connect();
  for (const [prefix, commit] of [['c', true], ['a', false], ['d', true]]) {
    const transaction = await producer.transaction();
    // explicit partitions: kafkajs 2.2.4 re-partitions keyless messages when it retries a send (after
    // CONCURRENT_TRANSACTIONS, which a new transaction meets while the last one's markers are written)
    // and can then put one value in two partitions and another in none
    const messages = Array.from({ length: n }, (_, i) => ({ value: `${prefix}${i}`, partition: i % 3 }));
    await transaction.send({ topic, messages });
    if (commit) await transaction.commit();
    else await transaction.abort();
  }
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: 'kafkajs-txn-reader' });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  const distinct = new Set();
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${JSON.stringify(got)} within 60 s`)), 60000);
    consumer
      .run({
        eachMessage: async ({ partition, message }) => {
          got.push(message.value.toString());
          distinct.add(message.value.toString());
          // every committed value, then a while longer: anything aborted would show too
          if (distinct.size === 2 * n) {
            clearTimeout(timer);
            setTimeout(resolve, 2000);
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ consumed: got }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
