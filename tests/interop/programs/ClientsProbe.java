// Kafka's Java producer and consumer against the project's cluster, at their defaults (an idempotent
// producer with acks=all; a consumer in a group, classic protocol).
//
// java -cp <kafka-clients jars> ClientsProbe.java <client.properties> <topic> <count> <group>
//
// Sends <count> keyed records, reads them back in <group> and commits; then sends ten more and reads
// them with a second member of the group, which must start where the first committed. Prints one JSON
// object on the last line of stdout: what was sent (partition, offset, key, value), what each consumer
// read, and the group's committed offsets.

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileReader;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ClientsProbe {
    static final long DEADLINE_MS = 60_000;
    static final int EXTRA = 10;

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileReader reader = new FileReader(args[0])) {
            props.load(reader);
        }
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        String group = args[3];
        Map<String, Object> out = new LinkedHashMap<>();
        List<List<Object>> sent = produce(props, topic, 0, count);
        out.put("first", consume(props, topic, group, count, out, "assigned"));
        sent.addAll(produce(props, topic, count, EXTRA));
        out.put("second", consume(props, topic, group, EXTRA, out, "committed"));
        out.put("sent", sent);
        System.out.println(new ObjectMapper().writeValueAsString(out));
    }

    static List<List<Object>> produce(Properties props, String topic, int first, int count) throws Exception {
        Properties config = new Properties();
        config.putAll(props);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        List<List<Object>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(config)) {
            List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = first; i < first + count; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)));
            }
            for (int i = 0; i < count; i++) {
                RecordMetadata m = acks.get(i).get();
                sent.add(List.of(m.partition(), m.offset(), "k" + (first + i), "v" + (first + i)));
            }
        }
        return sent;
    }

    /** Reads {@code count} records as a member of {@code group}, commits, and notes what it was given. */
    static List<List<Object>> consume(Properties props, String topic, String group, int count,
                                      Map<String, Object> out, String noted) {
        Properties config = new Properties();
        config.putAll(props);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<List<Object>> read = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (read.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    read.add(List.of(r.partition(), r.offset(), r.key(), r.value()));
                }
            }
            consumer.commitSync();
            Set<TopicPartition> assigned = consumer.assignment();
            if (noted.equals("assigned")) {
                out.put(noted, assigned.stream().map(TopicPartition::partition).sorted().toList());
            } else {
                Map<String, Long> committed = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : consumer.committed(assigned).entrySet()) {
                    committed.put(String.valueOf(e.getKey().partition()), e.getValue().offset());
                }
                out.put(noted, committed);
            }
        }
        return read;
    }
}
