// The lab's Flink word count (kind flink-hdfs): a real batch job of the DataStream API, compiled against the
// Flink distribution by `fawkes framework dists` (fawkes.frameworks.dists.ensure_flink_apps); tests and the lab only.
//
// usage: FlinkWordCount INPUT OUTPUT PARTITIONS SLEEP_PER_PARTITION_S   (the same usage as wordcount.py)
// (FlinkBurn: the same job, CPU-bound, for the mixed pool)
//
// The lines of INPUT are spread over PARTITIONS tasks that split them into words; each of those tasks first
// sleeps SLEEP_PER_PARTITION_S seconds, so the job lasts long enough to grow and shrink the cluster while it
// runs, and a cluster that grows gives its waiting tasks the new slots (batch mode schedules each task once a
// slot is free).  The counts are written by 4 tasks as "word<TAB>count" lines into part files part-NNNNN
// directly under OUTPUT, one per task, the same file again when a task runs again (RerunSafeFileSink).
package fawkes.apps;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;

public class FlinkWordCount {
    public static void main(String[] args) throws Exception {
        run(args, "SLEEP_PER_PARTITION_S", false, 4);
    }

    /** The word count of {@code args} (INPUT OUTPUT PARTITIONS SECONDS); each split task first sleeps
     * SECONDS, or with {@code burn} hashes for SECONDS of one core's CPU; {@code reducers} tasks write. */
    static void run(String[] args, String secondsName, boolean burn, int reducers) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: INPUT OUTPUT PARTITIONS " + secondsName);
            System.exit(2);
        }
        int parts = Integer.parseInt(args[2]);
        double seconds = Double.parseDouble(args[3]);
        if (parts < 1 || parts > 100000 || !(seconds >= 0 && seconds <= 86400)) {
            System.err.println("PARTITIONS must be 1..100000 and " + secondsName + " 0..86400");
            System.exit(2);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setRuntimeMode(RuntimeExecutionMode.BATCH);
        FileSource<String> src = FileSource.forRecordStreamFormat(new TextLineInputFormat(), new Path(args[0])).build();
        DataStream<String> lines = env.fromSource(src, WatermarkStrategy.noWatermarks(), "lines").setParallelism(1);
        DataStream<Tuple2<String, Long>> words = lines.rebalance().flatMap(new Split(seconds, burn)).setParallelism(parts)
                .returns(Types.TUPLE(Types.STRING, Types.LONG));
        DataStream<String> counts = words.keyBy(t -> t.f0)
                .reduce((a, b) -> new Tuple2<>(a.f0, a.f1 + b.f1)).setParallelism(reducers)
                .map(t -> t.f0 + "\t" + t.f1).returns(Types.STRING).setParallelism(reducers);
        counts.sinkTo(new RerunSafeFileSink(args[1])).setParallelism(reducers);
        env.execute();
    }

    /** SHA-256 chain steps per second of one core with the daemons' JIT (C1 only: -XX:TieredStopAtLevel=1),
     * 0.66 of Python's hashlib on the same machine (burn.py's 3.9 M/s): measured 1.7 M/s against 2.58 M/s. */
    static final double ITERATIONS_PER_CORE_S = 2_570_000;

    /** Sleeps (or burns CPU for) the given seconds at its start, then one (word, 1) per word of each line. */
    static class Split extends RichFlatMapFunction<String, Tuple2<String, Long>> {
        private final double seconds;
        private final boolean burn;

        Split(double seconds, boolean burn) {
            this.seconds = seconds;
            this.burn = burn;
        }

        @Override
        public void open(OpenContext ctx) throws Exception {
            if (!burn) {
                Thread.sleep((long) (seconds * 1000));
                return;
            }
            java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
            byte[] h = "fawkesfawkesfawkesfawkesfawkesfawkesfawkesfawkesfawkesfawkes".getBytes("UTF-8");
            for (long i = (long) (seconds * ITERATIONS_PER_CORE_S); i > 0; i--) {
                h = md.digest(h);
            }
        }

        @Override
        public void flatMap(String line, Collector<Tuple2<String, Long>> out) {
            for (String w : line.split("\\s+")) {
                if (!w.isEmpty()) {
                    out.collect(new Tuple2<>(w, 1L));
                }
            }
        }
    }
}
