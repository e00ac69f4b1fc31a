package dev.edgelite.android

import android.content.Context
import android.graphics.Bitmap
import org.tensorflow.lite.Interpreter
import java.nio.ByteBuffer
import java.nio.ByteOrder
import kotlin.math.ceil

/**
 * The camera screen's model: PP-OCR's text-direction classifier, converted by tflite-convert.
 * A crop holding one line of text -> ("0" or "180", the scores). contract.py's TextDirection
 * makes the same calls in Python.
 */
class TextDirection(context: Context, spec: AppSpec) : AutoCloseable {
    private val screen = spec.camera
    private val key = checkNotNull(screen.signature) { "the spec's camera has no signature" }
    private val signature = screen.signatures.getValue(key)
    private val input = signature.inputs.single()
    private val output = signature.outputs.single()
    private val height = input.shape[1]
    private val width = input.shape[2]
    val labels = AppSpec.readLabels(context, screen.labels)
    private val interpreter =
        Interpreter(AppSpec.mapAsset(context, screen.model), Interpreter.Options().setNumThreads(2))
    private val pixels = ByteBuffer.allocateDirect(4 * input.elements).order(ByteOrder.nativeOrder())
    private val scores = Array(1) { FloatArray(output.shape[1]) }

    init {
        check(input.dtype == "float32" && input.shape.size == 4 && input.shape[3] == 3) {
            "the camera model's input ${input.name} is ${input.dtype} ${input.shape.toList()}; " +
                "expected float32 [1, H, W, 3]"
        }
        check(labels.size == scores[0].size) {
            "${labels.size} labels in ${screen.labels}, ${scores[0].size} scores"
        }
    }

    /** Resize to the input's height keeping the aspect (at most its width), normalize, pad. */
    private fun fill(bitmap: Bitmap) {
        val image = screen.image
        val w = minOf(width, ceil(height * bitmap.width / bitmap.height.toDouble()).toInt())
        val scaled = Bitmap.createScaledBitmap(bitmap, w, height, true)
        val argb = IntArray(w * height)
        scaled.getPixels(argb, 0, w, 0, 0, w, height)
        val bgr = image.channels == "BGR"
        pixels.rewind()
        for (y in 0 until height) {
            for (x in 0 until width) {
                if (x >= w) {
                    repeat(3) { pixels.putFloat(image.padValue) }
                    continue
                }
                val p = argb[y * w + x]
                val r = (p shr 16 and 0xff).toFloat()
                val g = (p shr 8 and 0xff).toFloat()
                val b = (p and 0xff).toFloat()
                val c = if (bgr) floatArrayOf(b, g, r) else floatArrayOf(r, g, b)
                for (k in 0 until 3) pixels.putFloat((c[k] - image.mean[k]) / image.std[k])
            }
        }
        pixels.rewind()
    }

    fun classify(bitmap: Bitmap): Pair<String, FloatArray> {
        fill(bitmap)
        val inputs = HashMap<String, Any>()
        inputs[input.name] = pixels
        val outputs = HashMap<String, Any>()
        outputs[output.name] = scores
        interpreter.runSignature(inputs, outputs, key)
        val s = scores[0].copyOf()
        return labels[s.indices.maxByOrNull { s[it] } ?: 0] to s
    }

    override fun close() = interpreter.close()
}
