package dev.edgelite.android

import android.content.Context
import org.tensorflow.lite.Interpreter
import java.io.File
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.nio.FloatBuffer

/**
 * The personalization screen's model: edgelite's default sample converted with
 * `tflite-convert --train`, trained on the phone by stock LiteRT through its signatures:
 * `infer` (image -> probabilities), `train` (image, labels -> loss; one Adam step on the last
 * layer), `save` (-> every variable) and `restore` (every variable ->). contract.py's
 * Personalizer makes the same calls in Python.
 */
class Personalizer(context: Context, spec: AppSpec) : AutoCloseable {
    private val screen = spec.personalization
    private val interpreter = Interpreter(AppSpec.mapAsset(context, screen.model))
    val labels = AppSpec.readLabels(context, screen.labels)

    private fun key(role: String) = screen.keys.getValue(role)
    private fun signature(role: String) = screen.signatures.getValue(key(role))

    private val image = signature("infer").inputs.single()
    private val height = image.shape[1]
    private val width = image.shape[2]
    private val labelInput = signature("train").inputs.first { it.name != image.name }
    private val probabilities = signature("infer").outputs.single()
    private val loss = signature("train").outputs.single()

    /** The user's samples: height x width x 1 images (normalized) and their labels. */
    private val samples = mutableListOf<Array<Array<FloatArray>>>()
    private val sampleLabels = mutableListOf<Int>()
    val sampleCount: Int get() = samples.size
    val steps: Int get() = screen.steps

    init {
        check(labelInput.dtype == "int32") { "train's ${labelInput.name} is ${labelInput.dtype}" }
        check(labels.size == probabilities.shape.last()) {
            "${labels.size} labels in ${screen.labels}, ${probabilities.shape.last()} outputs"
        }
    }

    /** A drawing (gray bytes, row-major, a multiple of the input's size) -> the model's image:
     * each input pixel the mean of its area, stored as a byte, then (v - mean) / std. */
    fun preprocess(gray: IntArray, padHeight: Int, padWidth: Int): Array<Array<FloatArray>> {
        val fh = padHeight / height
        val fw = padWidth / width
        val mean = screen.image.mean[0]
        val std = screen.image.std[0]
        return Array(height) { y ->
            Array(width) { x ->
                var sum = 0L
                for (dy in 0 until fh) for (dx in 0 until fw) {
                    sum += gray[(y * fh + dy) * padWidth + x * fw + dx]
                }
                val pixel = Math.round(sum.toDouble() / (fh * fw)).toFloat()
                floatArrayOf((pixel - mean) / std)
            }
        }
    }

    fun addSample(sample: Array<Array<FloatArray>>, label: Int) {
        samples.add(sample)
        sampleLabels.add(label)
    }

    /** Probabilities of each label for each image (the batch size is set while running). */
    fun infer(images: List<Array<Array<FloatArray>>>): Array<FloatArray> {
        val out = Array(images.size) { FloatArray(probabilities.shape.last()) }
        val inputs = HashMap<String, Any>()
        inputs[image.name] = images.toTypedArray()
        val outputs = HashMap<String, Any>()
        outputs[probabilities.name] = out
        interpreter.runSignature(inputs, outputs, key("infer"))
        return out
    }

    /** One optimizer step on batch_size samples, round robin from sample step * batch_size
     * (no random numbers: contract.py takes the same batches). Returns the loss. */
    fun trainStep(step: Int): Float {
        check(samples.isNotEmpty()) { "add a sample first" }
        val b = screen.batchSize
        val pick = IntArray(b) { (step * b + it) % samples.size }
        val inputs = HashMap<String, Any>()
        inputs[image.name] = Array(b) { samples[pick[it]] }
        inputs[labelInput.name] = IntArray(b) { sampleLabels[pick[it]] }
        val value = FloatBuffer.allocate(1)   // the loss is a scalar
        val outputs = HashMap<String, Any>()
        outputs[loss.name] = value
        interpreter.runSignature(inputs, outputs, key("train"))
        return value.get(0)
    }

    /** Every variable (weights and optimizer state) into `file`: restore's inputs in the spec's
     * order, each its float32 values in the tensor's bytes (little-endian on every Android ABI). */
    fun save(file: File) {
        val buffers = HashMap<String, Any>()
        for (t in signature("save").outputs) {
            buffers[t.name] = ByteBuffer.allocateDirect(4 * t.elements).order(ByteOrder.nativeOrder())
        }
        // runSignature refuses an empty input map: save has one unused input (make_assets.py).
        val inputs = HashMap<String, Any>()
        inputs[screen.saveInput] = FloatArray(1)
        interpreter.runSignature(inputs, buffers, key("save"))
        file.outputStream().channel.use { channel ->
            for (t in signature("restore").inputs) {
                val buffer = buffers.getValue(t.name) as ByteBuffer
                buffer.rewind()
                channel.write(buffer)
            }
        }
    }

    fun restore(file: File) {
        val bytes = file.readBytes()
        var offset = 0
        val inputs = HashMap<String, Any>()
        for (t in signature("restore").inputs) {
            val n = 4 * t.elements
            require(offset + n <= bytes.size) { "${file.name}: ${bytes.size} bytes, too short for ${t.name}" }
            val buffer = ByteBuffer.allocateDirect(n).order(ByteOrder.nativeOrder())
            buffer.put(bytes, offset, n)
            buffer.rewind()
            inputs[t.name] = buffer
            offset += n
        }
        require(offset == bytes.size) { "${file.name}: ${bytes.size} bytes, expected $offset" }
        interpreter.runSignature(inputs, HashMap<String, Any>(), key("restore"))
    }

    override fun close() = interpreter.close()
}
